"""bisect.md: the path of an `ampbench bisect` search as a person reads it.

A strip of the range (one character a commit: `G` the good endpoint, `B` the bad one, `g`/`b` a candidate the
rule judged good/bad, `?` one it left undecided, `.` one never run, `^` under the first bad commit), then one
row per judged commit in the order the search ran them, with the rule's figure and the seeds it took.  A range
of package versions (`bisect --package`) shows the versions and each one's environment instead of commits.
"""

from __future__ import annotations

from pathlib import Path

from ampbench.core.files import atomic_write_text
from ampbench.report.fmt import md_block, md_code, md_prose, md_table, md_text
from ampbench.results.bisect_file import BisectFile, Candidate

_MARK = {"good": "g", "bad": "b", "skip": "?"}


def strip(doc: BisectFile) -> str:
    """The range as one line of marks, and a caret under the first bad commit when one was named."""
    marks = ["."] * len(doc.commits)
    for c in doc.candidates:
        if c.verdict:
            marks[c.index] = _MARK[c.verdict]
    marks[0] = "G" if marks[0] == "g" else marks[0]
    marks[-1] = "B" if marks[-1] == "b" else marks[-1]
    line = "".join(marks)
    if doc.first_bad is not None and not doc.stopped:
        line += "\n" + " " * doc.first_bad + "^"
    return line


def _observed(x: object) -> str:
    return f"{x:+.1%}" if isinstance(x, float) else md_text(x, 40) if x is not None else "—"


def _range_line(doc: BisectFile) -> str:
    """What was searched: the repository's commits, or the package's versions and the index they came from."""
    if doc.kind == "package":
        index = " ".join(doc.index) or "pip's configured index"
        return (f"{len(doc.commits)} versions of {md_code(doc.package)} from {md_code(doc.good)} to {md_code(doc.bad)} "
                f"({md_text(', '.join(doc.commits), 300)}; index: {md_code(index)}), each in its own environment "
                f"made from {md_code(doc.python)}")
    return f"{len(doc.commits)} commits of {md_code(doc.repo)} from {md_code(doc.good)} to {md_code(doc.bad)}"


def _placed(c: Candidate) -> str:
    """Where a look of --parallel ran: its devices and the runs side by side while it ran (issue 58.3)."""
    if c.crowding is None:
        return ""
    return f" (on {md_text(','.join(c.devices) or 'its share', 60)}, {c.crowding:.1f} runs side by side)"


def write_bisect_md(folder: Path, doc: BisectFile) -> Path:
    package = doc.kind == "package"
    rows = [[str(c.index), md_code(c.sha if package else c.sha[:10]),
             md_code(c.env) if package else md_text(doc.subjects[c.index] if c.index < len(doc.subjects) else "", 60),
             c.role, c.status, c.verdict, _observed(c.observed), str(c.seeds), f"{c.cost_s:.0f}"]
            for c in doc.candidates]
    point = "version" if package else "commit"
    if doc.stopped:
        outcome = f"Stopped: {md_prose(doc.stopped)}"
    elif doc.first_bad is not None and doc.last_good is not None and doc.first_bad == doc.last_good + 1:
        bound = f"{doc.wrong_step_bound:.3f}" if doc.wrong_step_bound is not None else "—"
        outcome = (f"First bad {point}: {md_code(doc.commits[doc.first_bad])} "
                   f"{md_text(doc.subjects[doc.first_bad], 120)}; the probability that some step of the search went "
                   f"the wrong way is at most {bound} (each FAIL at the rule's false-FAIL level, each PASS at "
                   "1 - confidence, summed).")
    elif doc.first_bad is not None:
        outcome = (f"Undecided: the first bad {point} is between {md_code(doc.commits[doc.last_good or 0][:10])} "
                   f"and {md_code(doc.commits[doc.first_bad][:10])}; every commit between stayed INCONCLUSIVE.")
    else:
        outcome = "Not finished (continue with `ampbench bisect --resume`)."
    lines = [f"# ampbench bisect: {md_text(doc.suite)} on {md_code(doc.rule)}", "",
             f"{_range_line(doc)}; judged modes: {', '.join(md_code(m) for m in doc.modes)}; up to {doc.max_seeds} seeds a commit.", "",
             outcome, "", md_block(strip(doc)), "",
             md_table(["#", point, "environment" if package else "subject", "role", "status", "verdict", doc.rule, "trials", "cost (s)"], rows,
                      ["r", "l", "l", "l", "l", "l", "r", "r", "r"])]
    lines += ["", *(f"- {c.index} {md_code(c.sha[:10])}: {md_prose(c.message, 300)}{_placed(c)}" for c in doc.candidates)]
    path = folder / "bisect.md"
    atomic_write_text(path, "\n".join(lines) + "\n", root=folder)
    return path
