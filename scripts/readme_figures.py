"""The README's figures, measured and written by this script, never typed by hand.

    python3 scripts/readme_figures.py           # measure, write docs/readme-figures.json, update README.md

What it measures (in an environment set up with `bash scripts/setup.sh --test`, as CI's):
- the default set-up's and every suite's install footprint (scripts/footprint.py: distributions, and bytes on
  disk with their compiled bytecode; Paddle's share of the default);
- the test count, as pytest collects it (about a minute: it imports every test module), and the number of test
  functions, which tests/test_readme_figures.py recounts cheaply to notice when the count went stale.

README.md's sentences holding the figures are found by `PHRASES` and rewritten from the recorded figures;
tests/test_readme_figures.py fails when README.md and docs/readme-figures.json disagree.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "readme-figures.json"
README = ROOT / "README.md"


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"


# README phrase -> (the pattern that finds it, how the figures render it)
PHRASES: dict[str, tuple[str, Any]] = {
    "default": (r"\(\d+ distributions, [\d.]+ GB on disk, Paddle [\d.]+ GB of it;",
                lambda f: f"({f['default']['distributions']} distributions, {_gb(f['default']['bytes'])} on disk, "
                          f"Paddle {_gb(f['default']['paddle_bytes'])} of it;"),
    "all": (r"\(or `all`: \d+ distributions, [\d.]+ GB on disk, one OpenCV\)",
            lambda f: f"(or `all`: {f['all']['distributions']} distributions, {_gb(f['all']['bytes'])} on disk, "
                      "one OpenCV)"),
    "tests": (r"[\d,]+ tests in three pytest-xdist workers",
              lambda f: f"{f['tests_collected']:,} tests in three pytest-xdist workers"),
}


def test_functions(tests: Path = ROOT / "tests") -> int:
    """`def test_...` functions in tests/ (collected tests are these and their parametrizations)."""
    count = 0
    for p in sorted(tests.glob("test_*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        count += sum(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test_")
                     for n in ast.walk(tree))
    return count


def render(figures: dict[str, Any]) -> dict[str, str]:
    return {name: fmt(figures) for name, (_, fmt) in PHRASES.items()}


def _footprint() -> Any:
    spec = importlib.util.spec_from_file_location("footprint", ROOT / "scripts" / "footprint.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def measure() -> dict[str, Any]:
    fp = _footprint()
    out: dict[str, Any] = {}
    for name, args in (("default", []), ("all", ["--suites", "all"])):
        dists, absent = fp.closure(fp.setup_lines(args))
        if absent:
            raise SystemExit(f"not installed here: {', '.join(sorted(absent))} (run bash scripts/setup.sh --test)")
        out[name] = {"distributions": len(dists), "bytes": sum(fp.size(d) for d in dists)}
    out["default"]["paddle_bytes"] = fp.size("paddlepaddle")
    got = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"], cwd=ROOT,
                         capture_output=True, text=True, check=False, timeout=900)
    m = re.search(r"^(\d+) tests? collected", got.stdout, re.MULTILINE)
    if m is None:
        raise SystemExit(f"pytest --collect-only said no count:\n{got.stdout[-2000:]}{got.stderr[-2000:]}")
    out["tests_collected"] = int(m.group(1))
    out["test_functions"] = test_functions()
    return out


def update_readme(figures: dict[str, Any], text: str) -> str:
    for name, phrase in render(figures).items():
        text, n = re.subn(PHRASES[name][0], lambda _m, p=phrase: p, text)
        if n != 1:
            raise SystemExit(f"README.md: the {name!r} figure's sentence was found {n} times (expected once)")
    return text


def main() -> int:
    figures = measure()
    FIGURES.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    README.write_text(update_readme(figures, README.read_text(encoding="utf-8")), encoding="utf-8")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
