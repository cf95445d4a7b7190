#!/usr/bin/env python3
"""Are two runs' losses bit-identical, trial by trial and step by step? (refactoring acceptance)

    python scripts/same_losses.py RUN_A RUN_B [RUN_A2 RUN_B2 ...]

Prints one line per trial (steps compared, identical or the largest difference) and exits 1 when
any trial differs or is missing on one side. Used to show a restructuring changed no number:
run the same suite at the old and the new commit, then compare the two run folders.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ampbench.results import open_run


def compare(a: Path, b: Path) -> bool:
    ta = {t.key: t for t in open_run(a).trials}
    tb = {t.key: t for t in open_run(b).trials}
    same = True
    for key in sorted(set(ta) | set(tb)):
        if key not in ta or key not in tb:
            print(f"{key:32} only in {a if key in ta else b}")
            same = False
            continue
        la, lb = [s.loss for s in ta[key].steps], [s.loss for s in tb[key].steps]
        diff = max((abs(x - y) for x, y in zip(la, lb) if x is not None and y is not None), default=0.0)
        ok = la == lb and len(la) > 0
        same &= ok
        print(f"{key:32} steps {len(la):4}/{len(lb):<4} {'identical' if ok else f'DIFFER (max |d| {diff:.3g})'}")
    return same


def main(argv: list[str]) -> int:
    if len(argv) < 2 or len(argv) % 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    pairs = [(Path(argv[i]), Path(argv[i + 1])) for i in range(0, len(argv), 2)]
    return 0 if all([compare(a, b) for a, b in pairs]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
