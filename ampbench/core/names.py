"""Names ampbench makes: timestamps, run ids, slugs (one definition each)."""

from __future__ import annotations

import datetime as dt
import os
import re
import secrets


def utc_now() -> str:
    """The timestamp every result file records (`started`, `finished`, `created`): UTC, ISO 8601, seconds."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def new_run_id(tag: str = "") -> str:
    """A run (or probe) folder name: local start time, pid and random bits (`20261201-093000-1234ab12`),
    so two runs started in the same second never collide; `-tag` appended when given."""
    rid = f"{dt.datetime.now():%Y%m%d-%H%M%S}-{os.getpid() % 10000:04d}{secrets.token_hex(2)}"
    return f"{rid}-{tag}" if tag else rid


def slug(text: str, limit: int = 64) -> str:
    """A file-name-safe form of free text (device names, sweep points): `NVIDIA A100-SXM4` -> `nvidia-a100-sxm4`."""
    out = re.sub(r"[^a-z0-9._-]+", "-", str(text).lower()).strip("-.")
    return out[:limit] or "unknown"
