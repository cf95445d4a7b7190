"""mypy over ampbench/ is clean (config: pyproject.toml [tool.mypy]), and every `type: ignore` says why."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "ampbench"
# `# type: ignore[code]` followed on the same line by `# why`.
IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<rest>.*)$")


@pytest.mark.slow
def test_mypy_is_clean(request: pytest.FixtureRequest) -> None:
    # The cache lives in pytest's cache folder (ignored by git, kept between runs: ~10 s warm, ~40 s cold).
    store = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    cache = store.mkdir("mypy") if store is not None else None
    cmd = [sys.executable, "-m", "mypy", "ampbench"] + (["--cache-dir", str(cache)] if cache else [])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, f"mypy ampbench failed (exit {out.returncode}):\n{out.stdout}{out.stderr}"
    assert "Success: no issues found" in out.stdout, out.stdout


def ignores_without_reason(text: str, name: str) -> list[str]:
    bad = []
    for no, line in enumerate(text.splitlines(), 1):
        m = IGNORE.search(line)
        if m is None:
            continue
        reason = m.group("rest").strip()
        if not m.group("codes") or not reason.startswith("#") or len(reason.lstrip("# ")) < 10:
            bad.append(f"{name}:{no}: {line.strip()}")
    return bad


def test_every_type_ignore_names_its_code_and_says_why() -> None:
    bad = [b for p in sorted(PKG.rglob("*.py"))
           for b in ignores_without_reason(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))]
    assert not bad, "a `# type: ignore[code]` needs a `# reason` on the same line:\n  " + "\n  ".join(bad)


def test_the_ignore_checker_tells_a_reason_from_none() -> None:
    assert ignores_without_reason("x = f()  # type: ignore[arg-type]\n", "m.py") == [
        "m.py:1: x = f()  # type: ignore[arg-type]"]
    assert ignores_without_reason("x = f()  # type: ignore\n", "m.py")  # no code
    assert ignores_without_reason("x = f()  # type: ignore[arg-type]  # paddle's stub lacks it\n", "x.py") == []
