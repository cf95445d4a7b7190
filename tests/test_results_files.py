"""The shared text helpers of results.files (one definition each, used by runner, probe, diagnose, summary)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from ampbench.results import LOG_TAIL_MARKER, last_line, new_run_id, tail_lines, utc_now


def test_last_line_is_the_exception_line_not_the_appended_log_tail() -> None:
    tb = "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad shape\n\n"
    assert last_line(tb) == "ValueError: bad shape"
    killed = f"killed: RSS 7.1 GiB over the 6 GiB limit\n{LOG_TAIL_MARKER}\nstep 4 loss 0.3\nstep 5 loss 0.2"
    assert last_line(killed) == "killed: RSS 7.1 GiB over the 6 GiB limit"
    assert last_line("x" * 500, limit=10) == "x" * 10
    assert last_line(None) == "" and last_line("  \n \n") == ""


def test_utc_now_and_run_ids() -> None:
    stamp = dt.datetime.fromisoformat(utc_now())
    assert stamp.utcoffset() == dt.timedelta(0) and stamp.microsecond == 0
    assert re.fullmatch(r"\d{8}-\d{6}-\d{4}[0-9a-f]{4}", new_run_id()) and new_run_id() != new_run_id()
    assert re.fullmatch(r"\d{8}-\d{6}-\d{4}[0-9a-f]{4}-probe", new_run_id("probe"))


def test_tail_lines(tmp_path: Path) -> None:
    log = tmp_path / "t.log"
    log.write_text("".join(f"line {i}\n" for i in range(50)))
    assert tail_lines(log, 3) == "line 47\nline 48\nline 49"
    assert tail_lines(tmp_path / "missing.log") == ""
