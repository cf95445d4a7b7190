#!/usr/bin/env python3
"""Write tests/file_seconds.json from a JUnit XML report of a full test run: each test file's seconds.

    python3 -m pytest -q -n 3 --dist loadfile --junitxml=/tmp/tests.xml
    python3 scripts/test_file_seconds.py /tmp/tests.xml

tests/conftest.py hands the files to pytest-xdist longest first (a longest-first order keeps the last minutes
from being one worker's long file while the others idle); a stale or missing figure only changes the order.
"""

from __future__ import annotations

import collections
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "file_seconds.json"


def main(report: str) -> int:
    seconds: collections.Counter[str] = collections.Counter()
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        if len(module) >= 2 and module[0] == "tests":
            seconds[f"{module[1]}.py"] += float(case.get("time", 0))
    OUT.write_text(json.dumps({k: round(v, 1) for k, v in seconds.most_common()}, indent=0) + "\n")
    print(f"{OUT}: {len(seconds)} files, {sum(seconds.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
