"""The base of every policy object (launchers, seed policies, batch policies): plain data plus behaviour,
registered by its `kind` in its family, so a new one is one class in one file.

A policy's fields are its options; `record()` is what run.json (or a child process's options file) keeps
of it, and `Family.from_record` makes it again: the kind picks the class, the rest are its fields.  A
family (e.g. `Launcher`) names the package its policies live in (`PACKAGE`): every module there is
imported before a kind is looked up, so a file dropped into that package is found without a list to edit.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from ampbench.core.errors import ConfigError


class Policy(BaseModel):
    """One policy of a family: `kind` (a class constant) names it in records and on the command line."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: ClassVar[str] = ""
    PACKAGE: ClassVar[str] = ""                 # set on a family's base: where its policies live
    _kinds: ClassVar[dict[str, type[Policy]]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "_kinds" in cls.__dict__ or not cls.__dict__.get("kind"):
            return   # a family's base (it holds the registry) or an abstract step between
        cls._family()._kinds[cls.kind] = cls

    @classmethod
    def _family(cls) -> type[Policy]:
        return next(c for c in cls.__mro__ if issubclass(c, Policy) and "_kinds" in c.__dict__)

    def record(self) -> dict[str, Any]:
        """The policy as data: its kind and its options (what run.json keeps)."""
        return {"kind": self.kind, **self.model_dump(mode="json")}

    @classmethod
    def kinds(cls) -> dict[str, type[Self]]:
        """Every registered policy of the family, by kind (the family's package imported first)."""
        family = cls._family()
        _import_all(family.PACKAGE)
        return dict(family._kinds)  # type: ignore[arg-type]  # reason: registered subclasses of the family

    @classmethod
    def named(cls, kind: str, where: str, **options: Any) -> Self:
        """The policy of this kind with these options; an unknown kind is one line naming the known ones."""
        found = cls.kinds().get(kind)
        if found is None:
            raise ConfigError(where, kind, f"unknown; one of {', '.join(sorted(cls.kinds()))}")
        try:
            return found(**options)
        except ValidationError as e:
            err = e.errors()[0]
            raise ConfigError(where, kind, f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']} (give it with "
                              "its own options)") from None

    @classmethod
    def from_record(cls, data: dict[str, Any], where: str) -> Self:
        """A recorded policy made again (`where` names the file in an error)."""
        rest = {k: v for k, v in data.items() if k != "kind"}
        found = cls.kinds().get(str(data.get("kind")))
        if found is None:
            raise ConfigError(where, "kind", f"{data.get('kind')!r}: no such {cls._family().__name__} here "
                              f"(known: {', '.join(sorted(cls.kinds()))})")
        try:
            return found.model_validate(rest)
        except ValidationError as e:
            err = e.errors()[0]
            raise ConfigError(where, ".".join(str(p) for p in err["loc"]) or "kind", err["msg"]) from None


def _import_all(name: str) -> None:
    """The family's module, and every module of it when it is a package (a new policy's file among them)."""
    if not name:
        return
    module = importlib.import_module(name)
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        importlib.import_module(f"{name}.{info.name}")
