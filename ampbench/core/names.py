"""Names ampbench makes: timestamps, run ids, slugs (one definition each)."""

from __future__ import annotations

import datetime as dt
import os
import re
import secrets
from typing import Protocol


class Device(Protocol):
    """What names a device: a trial's or a run's `Env` (record/models.py, a layer above core)."""

    @property
    def device(self) -> str: ...

    @property
    def device_name(self) -> str: ...


def utc_now() -> str:
    """The timestamp every result file records (`started`, `finished`, `created`): UTC, ISO 8601, seconds."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def new_run_id(tag: str = "") -> str:
    """A run (or probe) folder name: local start time, pid and random bits (`20261201-093000-1234ab12`),
    so two runs started in the same second never collide; `-tag` appended when given."""
    rid = f"{dt.datetime.now():%Y%m%d-%H%M%S}-{os.getpid() % 10000:04d}{secrets.token_hex(2)}"
    return f"{rid}-{tag}" if tag else rid


def slug(text: str, *, lower: bool = False, keep: str = "._-", fallback: str = "x", limit: int = 120) -> str:
    """The one file-name-safe form of free text (device names, suite and run ids, config stems):
    runs of other characters become one `-`, no leading dot or dash (nothing hidden), at most `limit`
    characters (a 300-character run id still makes a valid file name); `fallback` when nothing is left.
    `NVIDIA A100-SXM4-40GB` -> `nvidia-a100-sxm4-40gb` with lower=True, keep="-"."""
    allowed = "A-Za-z0-9" + re.escape(keep)
    out = re.sub(f"[^{allowed}]+", "-", str(text))
    out = re.sub(r"-{2,}", "-", out.lower() if lower else out).strip("-.")
    return out[:limit].rstrip("-.") or fallback


def device_slug(env: Device) -> str:
    """A folder-safe name for the device, used for results/baselines/<slug>/ and run keys."""
    base = "cpu" if env.device in ("", "cpu") else (env.device_name or env.device)
    return slug(base or "cpu", lower=True, keep="-", fallback="cpu")
