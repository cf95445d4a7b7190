"""The errors a user can fix, phrased for them; the CLI's one guard turns any `UserError` into exit 2."""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """A problem with the user's input or files, already phrased as one line naming the file."""


class ConfigError(UserError):
    """A suite file problem, already phrased for the user: `file: key: reason`."""

    def __init__(self, file: str | Path, key: str, reason: str):
        self.file, self.key, self.reason = str(file), key, reason
        super().__init__(f"{file}: {key}: {reason}" if key else f"{file}: {reason}")


class ResultsError(UserError):
    """A result file that is missing, unreadable, truncated or not ours; the message names the file."""
