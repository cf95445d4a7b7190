"""Suite files on disk -> a validated `Suite`: TOML reading, profiles, `--set` overrides.

`[profiles.NAME]` tables are deep-merged over the base before validation, so the effective config
of a trial is always a complete, checked `Suite`. Every problem is raised as `ConfigError` naming
the file, the key path and the reason. This module never imports paddle (errors must be instant).
"""

from __future__ import annotations

import copy
import difflib
import inspect
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args, get_origin

import tomllib
from pydantic import BaseModel, ConfigDict, ValidationError

from ampbench.config.bundled import resolve_suite
from ampbench.config.retired import retired
from ampbench.config.suite import DEFAULT_PROFILE, Suite
from ampbench.core.errors import ConfigError

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails


class LoadedSuite(BaseModel):
    """A suite plus where it came from and which profile made it."""

    model_config = ConfigDict(frozen=True)
    path: str
    profile: str
    suite: Suite
    raw: dict[str, Any]


_TOP_KEYS = {"suite", "workload", "train", "modes", "thresholds", "distributed", "flags", "profiles", "claims"}
_PROFILE_KEYS = (_TOP_KEYS - {"profiles"}) | {"seeds"}


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Tables merge key by key; anything else (lists included) is replaced."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _set_dotted(data: dict[str, Any], dotted: str, value: Any, file: str) -> None:
    keys = dotted.split(".")
    if not all(k.strip() for k in keys):
        raise ConfigError(file, dotted, "empty key part; write KEY.SUBKEY=VALUE, e.g. train.steps=5")
    cur = data
    for k in keys[:-1]:
        nxt = cur.setdefault(k, {})
        if not isinstance(nxt, dict):
            raise ConfigError(file, dotted, f"cannot set inside {k!r}, which is not a table")
        cur = nxt
    cur[keys[-1]] = value


def parse_override(text: str, file: str = "--set") -> tuple[str, Any]:
    """`train.steps=5` -> ("train.steps", 5); the value is read as TOML, else as a string."""
    if "=" not in text:
        raise ConfigError(file, text, "override must look like KEY=VALUE, e.g. train.steps=5")
    key, val = text.split("=", 1)
    try:
        parsed = tomllib.loads(f"v = {val}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = val
    except ValueError as e:   # an integer past Python's 4,300-digit conversion limit
        raise ConfigError(file, key.strip(), f"{str(e).split(';')[0]}: not a number a suite can hold") from None
    return key.strip(), parsed


def key_path(loc: tuple[Any, ...], raw: dict[str, Any]) -> str:
    """Pydantic location -> 'modes[1].scaler.init_loss_scaling' (mode named where possible)."""
    parts: list[str] = []
    for i, p in enumerate(loc):
        if isinstance(p, int):
            name = ""
            if parts and parts[-1] == "modes" and i == 1:
                modes = raw.get("modes")
                modes = modes if isinstance(modes, list) else []
                if p < len(modes) and isinstance(modes[p], dict) and "name" in modes[p]:
                    name = f" ({modes[p]['name']})"
            parts[-1] = f"{parts[-1]}[{p}]{name}" if parts else f"[{p}]"
        else:
            parts.append(str(p))
    return ".".join(parts)


def _inner_model(annotation: Any) -> tuple[type[BaseModel] | None, int]:
    """The model a field holds (itself, in a list or an Optional, or as a dict's values: then one key of the
    location is the dict's), and how many location parts that dict key takes."""
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation, 0
    args = get_args(annotation)
    if get_origin(annotation) is dict and len(args) == 2:
        return _inner_model(args[1])[0], 1
    for a in args:
        model, skip = _inner_model(a)
        if model is not None:
            return model, skip
    return None, 0


def known_keys(root: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys the table at `loc` (a pydantic error's location, the unknown key last) accepts; [] when the
    location leaves the models."""
    model, parts, i = root, list(loc[:-1]), 0
    while i < len(parts):
        if isinstance(parts[i], int):
            i += 1
            continue
        field = model.model_fields.get(str(parts[i])) or next(
            (f for f in model.model_fields.values() if f.alias == parts[i]), None)
        inner, skip = _inner_model(field.annotation) if field is not None else (None, 0)
        if inner is None:
            return []
        model, i = inner, i + 1 + skip
    return sorted({f.alias or name for name, f in model.model_fields.items()})


def unknown_key_reason(key: str, known: list[str]) -> str:
    """`unknown key (did you mean batch_size?)`, as the verbs and suite names answer a typo."""
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return f"unknown key (did you mean {close[0]}?)"
    return "unknown key (check the spelling; see docs/reference/suite.md)"


def error_reason(err: ErrorDetails, root: type[BaseModel] | None = Suite, key: str = "") -> str:
    """A validation error as the reason after the key path; `root`: the model validated (for an unknown key's
    did-you-mean); a retired key (`key`, its dotted path) names what replaced it."""
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden" and retired(key):
        return str(retired(key))
    if err["type"] == "extra_forbidden":
        return unknown_key_reason(str(err["loc"][-1]), known_keys(root, err["loc"]) if root is not None else [])
    if err["type"] == "missing":
        return "required key is missing"
    if "input" in err and err["type"] not in ("model_type",) and not isinstance(err["input"], dict):
        got = repr(err["input"])
        return f"{msg} (got {got if len(got) <= 80 else got[:77] + '...'})"
    return msg


SuiteCheck = Callable[[Suite, str, str], None]  # (suite, file, profile): raises ConfigError


def validate_suite(data: dict[str, Any], file: str, profile: str, on_valid: SuiteCheck | None = None) -> Suite:
    """Validate merged data into a Suite; `on_valid` adds checks config/ cannot know (the workload's
    own parameters: workloads.suites.check_workload)."""
    where = file if profile == DEFAULT_PROFILE else f"{file} (profile {profile})"
    try:
        suite = Suite.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        more = f" (+{len(e.errors()) - 1} more)" if len(e.errors()) > 1 else ""
        key = key_path(err["loc"], data)
        raise ConfigError(where, key, error_reason(err, key=key) + more) from None
    if on_valid is not None:
        on_valid(suite, file, profile)
    return suite


MAX_SUITE_INT = 2**63   # TOML's own integer range (64-bit); tomllib reads longer ones, nothing downstream can use them
_NOT_FINITE = "inf and nan are not allowed: give a finite number"


def _non_finite(data: Any, path: str = "") -> tuple[str, str] | None:
    """(key path, reason) of the first number no suite can hold: inf/nan (TOML allows them; JSON and thresholds
    do not), or an integer outside TOML's 64-bit range (10**400 would overflow a float or a numpy array)."""
    if isinstance(data, float) and not math.isfinite(data):
        return path or "(value)", _NOT_FINITE
    if isinstance(data, int) and not isinstance(data, bool) and not -MAX_SUITE_INT <= data < MAX_SUITE_INT:
        return path or "(value)", "an integer outside the 64-bit range TOML allows: give a smaller number"
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        found = _non_finite(v, f"{path}[{k}]" if isinstance(k, int) else f"{path}.{k}".lstrip("."))
        if found:
            return found
    return None


def read_toml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        raise ConfigError(p, "", "is a folder, not a suite file (give the .toml file inside it, or a bundled suite name)")
    if not p.is_file():
        raise ConfigError(p, "", "suite file not found (try `ampbench suites` to list the bundled ones)")
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(p, "", f"malformed TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(p, "", f"not UTF-8 text: {e}") from None
    except ValueError as e:   # an integer past Python's 4,300-digit conversion limit (tomllib raises it as is)
        raise ConfigError(p, "", f"{str(e).split(';')[0]}: not a number a suite can hold") from None


def resolve_profile(requested: str | None, available: list[str], has_gpu: bool) -> str:
    """--profile wins; otherwise `cpu` when there is no GPU and the suite has one; else the base."""
    if requested:
        return requested
    if not has_gpu and "cpu" in available:
        return "cpu"
    return DEFAULT_PROFILE


def _profile_table(profiles: Any, chosen: str, available: list[str], file: str) -> dict[str, Any]:
    """The chosen [profiles.NAME] table, its shape checked before anything merges it."""
    if chosen not in profiles:
        raise ConfigError(file, f"profiles.{chosen}",
                          f"no such profile; available: {', '.join([DEFAULT_PROFILE, *available])}")
    prof = profiles[chosen]
    if not isinstance(prof, dict):
        raise ConfigError(file, f"profiles.{chosen}", f"must be a table ([profiles.{chosen}]), got {prof!r}")
    prof = dict(prof)
    bad = sorted(set(prof) - _PROFILE_KEYS)
    if bad:
        raise ConfigError(file, f"profiles.{chosen}.{bad[0]}", f"unknown key; allowed: {sorted(_PROFILE_KEYS)}")
    for key in sorted(_PROFILE_KEYS - {"modes", "seeds", "claims"}):
        if key in prof and not isinstance(prof[key], dict):
            raise ConfigError(file, f"profiles.{chosen}.{key}", f"must be a table, got {prof[key]!r}")
    for key in ("modes", "claims"):
        if key in prof and not isinstance(prof[key], list):
            raise ConfigError(file, f"profiles.{chosen}.{key}", f"must be a list of [[profiles.NAME.{key}]] tables")
    if "seeds" in prof:
        prof["suite"] = {**prof.get("suite", {}), "seeds": prof.pop("seeds")}
    return prof


def _check_shape(raw: dict[str, Any], file: str) -> dict[str, Any]:
    """Top-level tables and `profiles` must have the shape the merge expects; returns profiles."""
    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        raise ConfigError(file, unknown[0], f"unknown top-level table; expected one of {sorted(_TOP_KEYS)}")
    profiles = raw.get("profiles", {})
    if not isinstance(profiles, dict):
        raise ConfigError(file, "profiles", "must be a table of [profiles.NAME] tables")
    bad = next((k for k in sorted(profiles) if not isinstance(profiles[k], dict)), None)
    if bad is not None:
        raise ConfigError(file, f"profiles.{bad}", f"must be a table ([profiles.{bad}]), got {profiles[bad]!r}")
    where = _non_finite(raw)
    if where:
        raise ConfigError(file, *where)
    return profiles


def _check_claim_modes(raw: dict[str, Any], profiles: dict[str, Any], file: str) -> None:
    """A claim names a mode the file defines, in its base or in a profile: a profile with fewer modes (cpu) keeps
    the claims, which a run of it judges as its modes allow (judge/rules/claims.py), but a misspelt mode is an
    error here, not a claim that is never judged."""
    tables = [raw, *(p for p in profiles.values() if isinstance(p, dict))]
    lists = [t["modes"] for t in tables if isinstance(t.get("modes"), list)]
    names = {m["name"] for modes in lists for m in modes if isinstance(m, dict) and isinstance(m.get("name"), str)}
    where = [("", raw)] + [(f"profiles.{k}.", p) for k, p in profiles.items() if isinstance(p, dict)]
    for prefix, table in where:
        claims = table.get("claims")
        for i, claim in enumerate(claims if isinstance(claims, list) else []):
            mode = claim.get("mode") if isinstance(claim, dict) else None
            if isinstance(mode, str) and mode not in names:
                raise ConfigError(file, f"{prefix}claims[{i}].mode", f"{mode!r} is no mode of this suite "
                                  f"(modes: {', '.join(sorted(names))})")


def load_suite(
    path: str | Path,
    profile: str | None = None,
    has_gpu: bool = False,
    overrides: list[str] | None = None,
    on_valid: SuiteCheck | None = None,
) -> LoadedSuite:
    """A suite file -> a validated Suite. The base is validated as written (a profile must not hide
    a mistake in it), then the chosen profile and the overrides are merged and validated again."""
    path = resolve_suite(path)
    file = str(path)
    raw = read_toml(path)
    profiles = _check_shape(raw, file)
    _check_claim_modes(raw, profiles, file)
    available = sorted(profiles)
    chosen = resolve_profile(profile, available, has_gpu)
    base = {k: v for k, v in raw.items() if k != "profiles"}
    validate_suite(base, file, DEFAULT_PROFILE, on_valid)
    if chosen != DEFAULT_PROFILE:
        base = deep_merge(base, _profile_table(profiles, chosen, available, file))
    for ov in overrides or []:
        key, val = parse_override(ov)
        _set_dotted(base, key, val, file)
    where = _non_finite(base)
    if where:
        raise ConfigError("--set", *where)
    suite = validate_suite(base, file, chosen, on_valid)
    return LoadedSuite(path=file, profile=chosen, suite=suite, raw=base)
