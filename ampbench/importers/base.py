"""What the importers share: the result type, the TOML writer, value checks and the error boundary.

An importer turns another tool's training config into an ampbench suite and lists, by name,
every key it could not honour (with why), so nothing a user set is dropped silently.

Hostile or careless input is expected (issue 24): every value that reaches the suite passes a typed
check naming `file: key: reason`; anything else an importer trips over is turned into the same one
line by `boundary`; files are read bounded (size, YAML alias expansion, nesting); and the suite is
written by a TOML library (tomli-w), never by pasting text, so a key or value holding a newline can
never become a live TOML line. The comment header is escaped the same way.
"""

from __future__ import annotations

import contextlib
import copy
import math
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ampbench.core.errors import ConfigError

MAX_INPUT_BYTES = 4 * 2**20     # a training config is a few KB; more is not one
MAX_DEPTH = 64                  # PaddleOCR/PaddleNLP configs nest about 5 deep
MAX_NODES = 200_000             # YAML nodes after alias expansion (a billion-laughs file expands to 10**9)


@dataclass
class Imported:
    """A suite (as TOML-ready data) plus the keys not honoured, each with its reason."""

    suite: dict[str, Any]
    not_honoured: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)  # printed, and kept in suite.notes for report.md

    def decide(self, text: str) -> None:
        self.decisions.append(text)

    def finish(self) -> None:
        """Close the decisions (the count of keys not honoured) and store them in `[suite] notes`."""
        if self.not_honoured:
            self.decide(f"not honoured: {len(self.not_honoured)} key(s): {', '.join(self.not_honoured)}")
        self.suite.setdefault("suite", {})["notes"] = list(self.decisions)


EMULATED_PROFILE = "cpu-emulated"
EMULATED_NOTE = ("a `cpu-emulated` profile: the cpu profile with its AMP modes emulated, AMP's float16/bfloat16 "
                 "numerics judged on a CPU (docs/emulation.md)")


def add_emulated_profile(imported: Imported) -> None:
    """Beside an imported suite's `cpu` profile, a `cpu-emulated` one: the same, its AMP modes `emulate = true`
    and the suite judging numerics alone, so `--profile cpu-emulated` answers on a CPU what the cpu profile
    cannot (AMP inactive there).  None for a suite without a cpu profile, or one whose CPU run is several
    processes (emulation runs one)."""
    suite = imported.suite
    profiles: Any = suite.get("profiles")
    if not isinstance(profiles, dict) or not isinstance(profiles.get("cpu"), dict) or EMULATED_PROFILE in profiles:
        return
    cpu: dict[str, Any] = profiles["cpu"]
    modes = _emulated_modes(suite, cpu)
    if not modes:
        return
    profiles[EMULATED_PROFILE] = {**copy.deepcopy(cpu), "modes": modes,
                                  "suite": {**cpu.get("suite", {}), "judges": "numerics"}}
    imported.decide(EMULATED_NOTE)
    suite.setdefault("suite", {}).setdefault("notes", []).append(EMULATED_NOTE)


def _emulated_modes(suite: dict[str, Any], cpu: dict[str, Any]) -> list[dict[str, Any]]:
    """The cpu profile's modes with each AMP one emulated; [] where there is none, or the CPU run is several
    processes."""
    from ampbench.config.loading import deep_merge

    merged = deep_merge({k: v for k, v in suite.items() if k != "profiles"}, cpu)
    dist = merged.get("distributed") or {}
    if int(dist.get("nproc_per_node", 1)) * int(dist.get("nnodes", 1)) > 1:
        return []
    modes = [dict(m, emulate=True) if m.get("level", "O0") != "O0" else dict(m)
             for m in merged.get("modes", []) if isinstance(m, dict)]
    return modes if any(m.get("emulate") for m in modes) else []


class UnsupportedConfig(ConfigError):
    """The config asks for something ampbench cannot benchmark (exit 2 with the reason)."""


# ---------------------------------------------------------------- reading the input, bounded


def read_input(path: str | Path, what: str) -> str:
    """The config's text: a regular file, at most MAX_INPUT_BYTES, UTF-8; otherwise `file: reason`."""
    from ampbench.core.errors import ResultsError
    from ampbench.core.files import read_bytes

    file = str(path)
    try:
        data = read_bytes(Path(path), what, limit=MAX_INPUT_BYTES)
    except ResultsError as e:
        raise ConfigError(file, "", str(e).removeprefix(f"{file}: ")) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(file, "", f"not UTF-8 text (byte {e.start}); save the file as UTF-8") from None


def _depth_and_size(root: Any) -> tuple[int, int]:
    """Depth and node count of a composed YAML graph as if every alias were expanded, without expanding
    it: each node's count is computed once (memoised), so a billion-laughs file is measured in
    microseconds. Raises on a cycle (a recursive alias)."""
    import yaml

    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    visiting: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        nid = id(node)
        if done:
            kids = _children(node, yaml)
            size[nid] = min(1 + sum(size[id(k)] for k in kids), 10**18)
            depth[nid] = 1 + max((depth[id(k)] for k in kids), default=0)
            visiting.discard(nid)
            continue
        if nid in size:
            continue
        if nid in visiting:
            raise ValueError("a recursive alias (a node that contains itself)")
        visiting.add(nid)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node, yaml) if id(k) not in size)
    return depth[id(root)], size[id(root)]


def _children(node: Any, yaml: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [x for kv in node.value for x in kv]
    return []


def load_yaml(text: str, file: str) -> Any:
    """YAML (safe tags only) with alias expansion, depth and size bounded before any object is built."""
    import yaml

    try:
        loader = yaml.SafeLoader(text)  # the reader already refuses control characters here
    except yaml.YAMLError as e:
        raise ConfigError(file, "", f"not valid YAML ({one_line(str(e))})") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        depth, nodes = _depth_and_size(node)
        if depth > MAX_DEPTH:
            raise ConfigError(file, "", f"nested {depth} levels deep (limit {MAX_DEPTH}); not a training config")
        if nodes > MAX_NODES:
            raise ConfigError(file, "", f"its aliases expand to {nodes:,} values (limit {MAX_NODES:,}): "
                              "an alias bomb, not a training config")
        return loader.construct_document(node)
    except RecursionError:
        raise ConfigError(file, "", "nested too deeply to be a training config") from None
    except ValueError as e:
        raise ConfigError(file, "", f"not a usable YAML document: {e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(file, "", f"not valid YAML ({one_line(str(e))})") from None
    finally:
        loader.dispose()


def load_json_object(text: str, file: str) -> Any:
    import json

    try:
        data = json.loads(text)
    except RecursionError:
        raise ConfigError(file, "", "nested too deeply to be Trainer arguments") from None
    except json.JSONDecodeError as e:
        raise ConfigError(file, "", f"not valid JSON ({e})") from None
    if _depth(data) > MAX_DEPTH:
        raise ConfigError(file, "", f"nested more than {MAX_DEPTH} levels deep; not Trainer arguments")
    return data


def _depth(data: Any) -> int:
    best, stack = 0, [(data, 1)]
    while stack:
        x, d = stack.pop()
        best = max(best, d)
        if d > MAX_DEPTH:
            break
        if isinstance(x, dict):
            stack.extend((v, d + 1) for v in x.values())
        elif isinstance(x, list):
            stack.extend((v, d + 1) for v in x)
    return best


# ---------------------------------------------------------------- typed values


def one_line(text: str, limit: int = 200) -> str:
    """User text for a message or a comment: control and line-separator characters escaped, so it
    stays on one line whatever it holds."""
    out = []
    for c in str(text):
        if c == "\t" or unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp"):
            out.append(c)
        else:
            out.append(c.encode("unicode_escape").decode("ascii"))
    s = "".join(out)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def braced(text: object) -> str:
    """User data (a Trainer argument, a path, an op name) as a literal text of a command suite, whose
    `{name}` are placeholders: `{` and `}` doubled, so the program receives `exp{1}` as typed."""
    return str(text).replace("{", "{{").replace("}", "}}")


def _show(v: Any) -> str:
    return one_line(repr(v), 80)


def number(file: str, key: str, value: Any, kind: type = float, *, minimum: float | None = None,
           above: float | None = None, maximum: float | None = None) -> Any:
    """A number from the user's config, or ConfigError naming the key: booleans, strings, lists,
    inf/nan and out-of-range values are refused (PaddleOCR would crash or train nonsense on them)."""
    hint = ""
    if isinstance(value, str) and "$" in value:
        hint = " (a shell variable pasted unexpanded? put its value)"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(file, key, f"{_show(value)} is not a number{hint}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(file, key, f"{value} is not a finite number")
    if kind is int:
        if isinstance(value, float) and not value.is_integer():
            raise ConfigError(file, key, f"{value} is not a whole number")
        value = int(value)
    else:
        value = float(value)
    if minimum is not None and value < minimum:
        raise ConfigError(file, key, f"{value} is below the minimum {minimum:g}")
    if above is not None and value <= above:
        raise ConfigError(file, key, f"{value} must be above {above:g}")
    if maximum is not None and value > maximum:
        raise ConfigError(file, key, f"{value} is above the maximum {maximum:g}")
    return value


def mapping(file: str, key: str, value: Any) -> dict[str, Any]:
    """A section that must be a mapping (absent or null counts as empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(file, key, f"must be a mapping, found {type(value).__name__} {_show(value)}")
    return value


def items(file: str, key: str, value: Any) -> list[Any]:
    """A list (absent or null counts as empty)."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise ConfigError(file, key, f"must be a list, found {type(value).__name__} {_show(value)}")
    return list(value)


def text(file: str, key: str, value: Any, path: bool = False) -> str:
    """A name or a path: a string (a number is accepted as its text); control characters refused."""
    if isinstance(value, (dict, list, tuple)) or value is None:
        raise ConfigError(file, key, f"must be a string, found {type(value).__name__} {_show(value)}")
    s = str(value)
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in s):
        raise ConfigError(file, key, f"{_show(s)} contains a control character (a newline?)"
                          + (": not a usable path" if path else ""))
    return s


@contextlib.contextmanager
def boundary(file: str, key: str = "") -> Iterator[None]:
    """The importers' one error boundary: any value an importer cannot use becomes `file: key: reason`
    (exit 2), never a traceback."""
    try:
        yield
    except ConfigError:
        raise
    except RecursionError:
        raise ConfigError(file, key, "nested too deeply") from None
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError, ZeroDivisionError) as e:
        what = {"KeyError": "missing key", "IndexError": "a list is too short"}.get(type(e).__name__, "bad value")
        raise ConfigError(file, key or "(config)", f"{what}: {one_line(str(e))}") from None


# ---------------------------------------------------------------- writing the suite


def _finite(data: Any, where: str, file: str) -> None:
    if isinstance(data, float) and not math.isfinite(data):
        raise ConfigError(file, where, f"{data} cannot be written to a suite (inf and nan are not allowed)")
    if isinstance(data, dict):
        for k, v in data.items():
            _finite(v, f"{where}.{k}" if where else str(k), file)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _finite(v, f"{where}[{i}]", file)


def to_toml(suite: dict[str, Any], header: list[str] | None = None) -> str:
    """Suite data -> TOML text through tomli-w; header lines become comments, each escaped to one line."""
    import tomli_w

    out = "".join(f"# {one_line(line, 10_000)}\n" if line else "#\n" for line in (header or []))
    return out + ("\n" if header else "") + tomli_w.dumps(suite)


def header_lines(source: str, imported: Imported) -> list[str]:
    """The comment block at the top of an imported suite: source, notes, keys not honoured."""
    lines = [f"Imported from {source} by `ampbench import`."]
    lines += [f"Decided: {d}" for d in imported.decisions]
    lines += imported.notes
    if imported.not_honoured:
        lines.append("Keys not honoured:")
        lines += [f"  {k}: {why}" for k, why in imported.not_honoured.items()]
    return lines


def render_checked(imported: Imported, source: str, file: str) -> str:
    """The suite as TOML, after validating it (every profile) exactly as `ampbench run` would, and
    after checking that the text reads back as exactly the data (nothing smuggled in by a comment)."""
    import os
    import tempfile

    import tomllib

    from ampbench.workloads.suites import load_suite

    _finite(imported.suite, "", file)
    with boundary(file):
        text = to_toml(imported.suite, header_lines(source, imported))
    if tomllib.loads(text) != tomllib.loads(to_toml(imported.suite)):
        raise ConfigError(file, "", "the written suite would not read back as imported; refusing to write it")
    fd, tmp = tempfile.mkstemp(suffix=".toml", prefix="ampbench-import-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        for profile in ["default", *tomllib.loads(text).get("profiles", {})]:
            try:
                load_suite(tmp, profile=profile)
            except ConfigError as e:
                raise ConfigError(e.file.replace(tmp, file), e.key, e.reason) from None
    finally:
        os.unlink(tmp)
    return text
