"""The pull-request comment of `ampbench pr-check`: the two-run comparison as one markdown table.

One row per mode: the base's and the head's samples/s, the one change (the figure `check --baseline`'s test
decided on, with its interval) and whether it is significant, a significant slowdown in bold.  Under it what
the change means, why a change was not significant, and the outcome the check exits with.  The first line is
an HTML comment the workflows find to update their earlier comment instead of adding another.
"""

from __future__ import annotations

from dataclasses import dataclass

from ampbench.report import fmt
from ampbench.report.compare_runs import CHANGE_NOTE, change_text, significance_note, significance_text
from ampbench.report.fmt import md_code, md_prose, md_table, md_text
from ampbench.results.compare_file import CompareFile

MARKER = "<!-- ampbench-pr-check -->"


@dataclass(frozen=True)
class Side:
    """One side of the pull request: its commit and subject."""

    sha: str
    subject: str


def pr_comment(doc: CompareFile, base: Side, head: Side, suite: str, outcome: str) -> str:
    """The comment: the table of the head's run (current) against the base's (other)."""
    other = {r.mode: r for r in doc.rows if r.role == "other"}
    rows = []
    for r in (r for r in doc.rows if r.role == "current"):
        mark = significance_text(r)
        slower = r.significance is not None and r.significance.mark == "slower"
        b = other.get(r.mode)
        # the change and the mark are ampbench's own text (figures, a fixed word list): nothing to escape
        rows.append([md_code(r.mode) + (" (emulated: not an AMP timing)" if r.emulated else ""), fmt.num(b.samples_per_s) if b else fmt.DASH, fmt.num(r.samples_per_s),
                     change_text(r), f"**{mark}**" if slower else mark,
                     f"{b.trials if b else 0} / {r.trials}"])
    lines = [MARKER, f"### ampbench: {md_text(suite)}, head {md_code(head.sha[:10])} against base {md_code(base.sha[:10])}",
             "", md_table(["Mode", "Base samples/s", "Head samples/s", "Change [95% CI]", "Significant", "Trials"], rows,
                          ["l", "r", "r", "r", "l", "r"]), "",
             f"**{md_text(outcome)}**", "",
             f"Base {md_code(base.sha[:10])} {md_text(base.subject, 120)}; head {md_code(head.sha[:10])} "
             f"{md_text(head.subject, 120)}."]
    if doc.warning:
        lines += ["", f"Warning: {md_prose(doc.warning, 400)}"]
    if (note := significance_note(doc)) is not None:
        lines += ["", md_prose(f"{CHANGE_NOTE} {note}", 1000)]
    why = [f"- {md_code(m)}: {s.mark}: {md_prose(s.why, 400)}" for m, s in doc.marks().items() if s.why]
    if why:
        lines += ["", *why]
    return "\n".join(lines) + "\n"
