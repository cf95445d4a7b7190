"""The one exception a suite problem raises, phrased for the user: `file: key: reason`."""

from __future__ import annotations

from pathlib import Path


class ConfigError(Exception):
    """A suite file problem, already phrased for the user: `file: key: reason`."""

    def __init__(self, file: str | Path, key: str, reason: str):
        self.file, self.key, self.reason = str(file), key, reason
        super().__init__(f"{file}: {key}: {reason}" if key else f"{file}: {reason}")
