"""The `ampbench` command (cli/base.py): the app and its error guard, and the verbs that register on it, each
parsing its options and calling one use case (cli/run.py, cli/verbs.py, cli/imports.py)."""

from ampbench.cli import imports, run, verbs
from ampbench.cli.base import app, main

__all__ = ["app", "imports", "main", "run", "verbs"]
