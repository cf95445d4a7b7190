"""`ampbench publish HISTORY_DIR -o SITE`: a static HTML dashboard of the nightly history, like `asv publish`.

One page per suite: throughput, peak memory, metric and verdict per mode over the runs, a per-mode
step-time histogram, interactive (plotly, report.dashboard_interactive) or as one embedded PNG
(report.dashboard_plots; `view`), every series cut where the config or device changed
(report.dashboard_series), one figure per device kind, the regressions as check --history cut the series
(judge.series: the nights it FAILed, named by the commit range between the last night before them and the first)
with each mode's level against the reference level, the verdict changes of every rule, and a table of runs
linking each run's self-contained report.html.  Reports are found in
HISTORY_DIR/reports/<suite>/<run_id>.html (where nightly.sh archives them), in the run folder the
history line names, or made from that run folder when it still exists (report.site_reports: never
written into a run folder, each folder read once).  No script or file is fetched.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from html import escape
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ampbench.config import REFERENCE_MODE
from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_text, os_reason
from ampbench.record import fields
from ampbench.report import fmt
from ampbench.report.dashboard_cuts import (
    MAX_REGRESSIONS,
    Regression,
    commit_range,
    fraction,
    kind_plots,
    regressions_html,
    series_html,
    series_regressions,
)
from ampbench.report.dashboard_series import kinds, views
from ampbench.report.html import CSS as BASE_CSS
from ampbench.report.html import page
from ampbench.report.site_reports import ReportFinder, copy_reports, slug
from ampbench.results.accepts import AcceptRecord, load_accepts
from ampbench.results.history import MODE_COMPUTED, NOT_CHECKED, ModeSummary, history_file, iter_history_rows

BAD = ("FAIL", "ERROR")
CSS = BASE_CSS + ".bad{color:#d62728;font-weight:bold}.ok{color:#2da44e}td.num{text-align:right}"


SITE_MARK = ".ampbench-site"   # marks a folder publish made, the only kind it replaces
LATEST_RUNS = 500              # rows on a suite page; older runs are on pages of OLDER_PAGE runs
OLDER_PAGE = 2000


def history_files(history: Path) -> list[Path]:
    history = Path(history)
    if history.is_file():
        return [history]
    if history.is_dir():
        files = sorted(history.glob("*.jsonl"))
        if files:
            return files
        raise ResultsError(f"{history}: no <suite>.jsonl history files in this folder")
    raise ResultsError(f"{history}: history folder not found")


def verdict_changes(entries: list[dict[str, Any]]) -> list[Regression]:
    """Per mode, each switch from a run that was not flagged to one that was (FAIL/ERROR), by any rule: the
    "Verdict changes" list.  Not what the dashboard calls a regression (judge.series: nights check --history
    FAILed on throughput, `series_regressions`)."""
    out = []
    modes = list(dict.fromkeys(m for e in entries for m in (e.get("modes") or {})))
    for mode in modes:
        last_good, was_bad = -1, False
        for i, e in enumerate(entries):
            m = (e.get("modes") or {}).get(mode)
            if not m or (m.get("verdict") or NOT_CHECKED) == NOT_CHECKED:
                continue
            bad = m.get("verdict") in BAD
            if bad and not was_bad:
                out.append(Regression(mode, last_good, i, list(m.get("flagged_rules") or [])))
            if not bad:
                last_good = i
            was_bad = bad
    return out


def load_suites(history: Path) -> list[tuple[str, list[dict[str, Any]]]]:
    """(suite, runs oldest first) per suite; several history files of one suite are merged (one run
    id once), so a suite is listed once and no history disappears."""
    merged: dict[str, dict[str, dict[str, Any]]] = {}
    hists: dict[str, tuple[tuple[str, str], str, dict[str, Any]]] = {}
    for path in history_files(history):
        for e in iter_history_rows(path, trials=False):  # plain dicts, one validated line at a time
            merged.setdefault(e["suite"], {})[e["run_id"]] = e
            _keep_newest_hist(e, hists)
    for suite, (_, run_id, h) in hists.items():  # back on the newest run that had one
        modes = merged[suite][run_id].get("modes") or {}
        for mode, hist in h.items():
            if mode in modes:  # a later line of the same run id (another file) may list other modes
                modes[mode]["step_time_hist"] = hist
    return [(suite, sorted(runs.values(), key=lambda d: (d.get("started") or "", d["run_id"])))
            for suite, runs in merged.items()]


def _keep_newest_hist(e: dict[str, Any], hists: dict[str, tuple[tuple[str, str], str, dict[str, Any]]]) -> None:
    """Take the step-time histograms off a row, keeping only the newest run's per suite (the dashboard
    draws that one; 100,000 rows of them would hold 100s of MB)."""
    h = {m: s.pop("step_time_hist") for m, s in (e.get("modes") or {}).items() if "step_time_hist" in s}
    key = (e.get("started") or "", e["run_id"])
    if h and (e["suite"] not in hists or hists[e["suite"]][0] <= key):
        hists[e["suite"]] = (key, e["run_id"], h)


def accepts_of(hist_root: Path, suite: str) -> list[AcceptRecord]:
    """The accepted levels of `suite` recorded beside its history file (results.accepts), as check --history
    reads them."""
    path = history_file(hist_root, suite)
    return load_accepts(path, suite) if path.is_file() else []


def check_site_output(output: Path) -> None:
    """`-o SITE` must be a folder publish may replace: absent, empty, or a site it made before."""
    if os.path.lexists(output) and output.is_symlink():
        raise ResultsError(f"{output}: is a symbolic link; give the site folder itself")
    if output.exists() and not output.is_dir():
        raise ResultsError(f"{output}: exists and is not a folder; publish writes a folder of pages")
    if output.is_dir() and any(output.iterdir()) and not (output / SITE_MARK).is_file() \
            and not (output / "index.html").is_file():
        raise ResultsError(f"{output}: a folder that is not an ampbench site; refusing to replace it "
                           "(give an empty or new folder)")
    blocker = next((p for p in output.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise ResultsError(f"{output}: cannot write: {blocker} is a file, not a folder")
    if not output.parent.is_dir():
        raise ResultsError(f"{output}: cannot write: its parent folder {output.parent} does not exist")


def publish(history: Path, output: Path, repo_url: str | None = None, interactive: bool = False) -> Path:
    """Write SITE/index.html and SITE/<suite>.html (+ SITE/reports/...); returns the index.
    `interactive`: the plots as plotly figures (dashboard_interactive.resolve_view says whether it can).

    The site is built in a fresh folder beside SITE and swapped in when complete: a full disk or a
    crash leaves the previous site (or nothing), never half a site."""
    history, output = Path(history), Path(output)
    check_site_output(output)
    hist_root = history if history.is_dir() else history.parent
    suites = load_suites(history)
    if not any(entries for _, entries in suites):
        raise ResultsError(f"{history}: the history holds no runs")
    try:
        build = Path(tempfile.mkdtemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent))
    except OSError as e:
        raise ResultsError(f"{output}: cannot write: {os_reason(e)}") from None
    try:
        _build_site(build, suites, hist_root, repo_url, interactive)
        _swap(build, output)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    return output / "index.html"


def _build_site(out: Path, suites: list[tuple[str, list[dict[str, Any]]]], hist_root: Path,
                repo_url: str | None, interactive: bool = False) -> None:
    atomic_write_text(out / SITE_MARK, "written by ampbench publish; the folder is replaced on each publish\n",
                      root=out)
    if interactive:
        from ampbench.report.dashboard_interactive import write_plotly_js

        write_plotly_js(out)
    rows = []
    finder = ReportFinder(hist_root, out / ".made-reports")
    for suite, entries in suites:
        links = copy_reports(entries, finder, out)
        accepts = accepts_of(hist_root, suite)
        older = _older_pages(out, suite, entries, links)
        atomic_write_text(out / f"{slug(suite)}.html",
                          suite_page(suite, entries, verdict_changes(entries), links, repo_url, older, interactive,
                                     accepts), root=out)
        rows.append(_index_row(suite, entries, series_regressions(entries, accepts)))
    body = ("<h1>ampbench dashboard</h1><p>Nightly AMP validation history, one page per suite. "
            "Verdict: the latest run's.</p><table><thead><tr><th>Suite</th><th>Runs</th><th>Latest run</th>"
            "<th>Latest verdict</th><th>Regressions</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    atomic_write_text(out / "index.html", page("ampbench dashboard", body + _CHECK_SCRIPT, CSS), root=out)
    shutil.rmtree(finder.scratch, ignore_errors=True)


def _swap(build: Path, output: Path) -> None:
    """Put the finished site at `output`; an older site there is moved aside first, then removed."""
    old = None
    try:
        if output.exists():
            old = output.parent / f".{output.name}.old-{os.getpid()}"
            os.replace(output, old)
        os.replace(build, output)
        os.chmod(output, 0o777 & ~_umask())
    except OSError as e:
        if old is not None and not output.exists():
            os.replace(old, output)
            old = None
        raise ResultsError(f"{output}: cannot write: {os_reason(e)}") from None
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


def _older_pages(out: Path, suite: str, entries: list[dict[str, Any]], links: dict[str, str]) -> list[str]:
    """Runs older than the latest LATEST_RUNS, newest first, on pages of OLDER_PAGE runs; their file names."""
    rest = entries[:-LATEST_RUNS] if len(entries) > LATEST_RUNS else []
    names = []
    frac = _fraction(entries)
    for k, stop in enumerate(range(len(rest), 0, -OLDER_PAGE), 1):
        chunk = rest[max(0, stop - OLDER_PAGE):stop]
        name = f"{slug(suite)}-runs-{k}.html"
        body = (f'<p><a href="{escape(slug(suite))}.html">{escape(suite)}</a></p><h1>{escape(suite)}: older runs '
                f"({k})</h1>" + _runs_table(chunk, links, frac))
        atomic_write_text(out / name, page(f"ampbench: {suite} (older runs {k})", body, CSS), root=out)
        names.append(name)
    return names


def _fraction(entries: list[dict[str, Any]]) -> bool:
    return fraction(entries)


def _verdict_html(v: str | None) -> str:
    v = v or NOT_CHECKED
    cls = "bad" if v in BAD else ("ok" if v == "PASS" else "")
    return f'<span class="{cls}">{escape(v)}</span>' if cls else escape(v)


def _index_row(suite: str, entries: list[dict[str, Any]], regs: list[Regression]) -> str:
    last = entries[-1]
    return (f'<tr><td><a href="{escape(slug(suite))}.html">{escape(suite)}</a></td><td class="num">{len(entries)}</td>'
            f"<td>{escape(str(last.get('started') or last['run_id']))}</td><td>{_verdict_html(last.get('verdict'))}</td>"
            f'<td class="num">{len(regs)}</td></tr>')


def suite_page(suite: str, entries: list[dict[str, Any]], regs: list[Regression], links: dict[str, str],
               repo_url: str | None, older: list[str] | None = None, interactive: bool = False,
               accepts: Sequence[Any] = ()) -> str:
    """One suite's page: a figure per device kind, the regressions and the series as check --history cut them
    (judge.series), the verdict changes `regs`, the runs."""
    from ampbench.report.dashboard_interactive import INTERACTIVE_RUNS

    shown = views(entries, accepts)
    plots = []
    groups = kinds(entries)
    for k, (kind, idx) in enumerate(groups):
        sub = [entries[i] for i in idx]
        head = f"<h3>Device kind <code>{escape(kind or 'not recorded')}</code> ({len(sub)} runs)</h3>" \
            if len(groups) > 1 else ""
        plots.append(head + kind_plots(suite, sub, idx, shown, interactive and len(sub) <= INTERACTIVE_RUNS, k))
    metric = next((e.get("metric") for e in reversed(entries) if e.get("metric")), "") or "metric"
    parts = [f'<p><a href="index.html">all suites</a></p><h1>{escape(suite)}</h1>',
             f"<p>{len(entries)} runs; primary metric <code>{escape(metric)}</code>.</p>", *plots,
             "<h2>Regressions</h2>", regressions_html(entries, shown, repo_url),
             "<h2>The series</h2>", series_html(entries, shown),
             "<h2>Verdict changes</h2>", _verdict_changes_html(entries, regs, repo_url),
             "<h2>Runs</h2>", _runs_note(entries, older or []), _runs_table(entries[-LATEST_RUNS:], links,
                                                                           _fraction(entries))]
    return page(f"ampbench: {suite}", "\n".join(parts) + _CHECK_SCRIPT, CSS)


def _runs_note(entries: list[dict[str, Any]], older: list[str]) -> str:
    if not older:
        return ""
    pages = ", ".join(f'<a href="{escape(n, quote=True)}">{k}</a>' for k, n in enumerate(older, 1))
    return (f"<p>The latest {LATEST_RUNS} of {len(entries)} runs, newest first; older runs, newest first: "
            f"pages {pages}.</p>")


def _verdict_changes_html(entries: list[dict[str, Any]], regs: list[Regression], repo_url: str | None) -> str:
    if not regs:
        return "<p>No mode went from passing to FAIL/ERROR in this history.</p>"
    items = []
    if len(regs) > MAX_REGRESSIONS:
        items.append(f"<li>{len(regs)} verdict changes; the latest {MAX_REGRESSIONS} are listed</li>")
    for r in regs[-MAX_REGRESSIONS:]:
        good = escape(entries[r.good]["run_id"]) if r.good >= 0 else "none (flagged since the first run shown)"
        rules = f" ({escape(', '.join(r.rules))})" if r.rules else ""
        items.append(f"<li><code>{escape(r.mode)}</code>{rules}: last good run {good}, first bad run "
                     f"{escape(entries[r.bad]['run_id'])}; commits {commit_range(entries, r, repo_url)}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def _runs_table(entries: list[dict[str, Any]], links: dict[str, str], frac: bool) -> str:
    """Newest first, one row per run and mode: which run (its start, report link, commit), the mode's figures
    (the catalog's columns, record/fields.py: as report.md's summary table heads and formats them) and its
    verdict."""
    metric = next((e.get("metric") for e in reversed(entries) if e.get("metric")), "") or "metric"
    view = fields.View(metric, frac, float(entries[-1].get("confidence") or 0.95) if entries else 0.95)
    cols = fields.columns("dashboard", ModeSummary, MODE_COMPUTED)
    # each row's mode read by attribute, with ModeSummary's defaults, as the catalog reads a ModeSummary: a
    # model built per row took 10 times this table's time (100,000 runs publish in under a minute, issue 24)
    defaults = {k: f.get_default(call_default_factory=True) for k, f in ModeSummary.model_fields.items()
                if not f.is_required()}
    head = ("<tr><th>Started</th><th>Run</th><th>Commit</th>" + "".join(f"<th>{escape(c.header(view))}</th>" for c in cols)
            + "<th>Verdict</th></tr>")
    rows = []
    for e in reversed(entries):
        for k, (mode, m) in enumerate((e.get("modes") or {}).items()):
            figures = SimpleNamespace(**{**defaults, **m})   # a history line's, validated when it was read
            run = _run_cells(e, links) if k == 0 else "<td></td><td></td><td></td>"
            rows.append(f"<tr>{run}" + "".join(_figure_html(c, figures, view) for c in cols)
                        + f"<td>{_mode_verdict_html(mode, m)}</td></tr>")
    emulated = any(m.get("amp_emulated") for e in entries for m in (e.get("modes") or {}).values())
    legend = f"<p>{fmt.EMULATED_MARK} {escape(fmt.EMULATED_LEGEND)}.</p>" if emulated else ""
    return f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>{legend}"


def _run_cells(e: dict[str, Any], links: dict[str, str]) -> str:
    """The run's own cells, on its first mode's row: its start, its report link (where it has one), its commit."""
    rid = escape(e["run_id"])
    run = f'<a href="{escape(links[e["run_id"]], quote=True)}">{rid}</a>' if e["run_id"] in links else rid
    return f"<td>{escape(str(e.get('started') or '')[:16])}</td><td>{run}</td><td>{_sha_html(e)}</td>"


def _mode_verdict_html(mode: str, m: dict[str, Any]) -> str:
    """The mode's verdict cell: `reference` for fp32, else its verdict, marked when AMP did not run or was
    emulated (its numerics judged, no AMP timing)."""
    inactive = (" (emulated)" if m.get("amp_emulated") else
                " (AMP inactive)" if m.get("amp_requested") and not m.get("amp_active") else "")
    return f"{'reference' if mode == REFERENCE_MODE else _verdict_html(m.get('verdict'))}{inactive}"


def _figure_html(c: fields.Column, m: Any, view: fields.View) -> str:
    cls = ' class="num"' if c.align == "r" else ""
    return f"<td{cls}>" + (f"<code>{escape(str(c.value(m, view)))}</code>" if c.col.kind == "code"
                           else escape(fmt.mark_emulated(c.text(m, view), c.col.kind, bool(m.amp_emulated)))) + "</td>"


def _sha_html(e: dict[str, Any]) -> str:
    return f"<code>{escape(fmt.short_sha(e.get('git_sha'), 10))}</code>" if e.get("git_sha") else ""


# Marks the page once every plot has decoded (the browser test reads it; readers never see it).
_CHECK_SCRIPT = ("<script>window.addEventListener('load',function(){var n=0;for(var i=0;i<document.images.length;i++)"
                 "{var im=document.images[i];if(im.complete&&im.naturalWidth>0)n++;}"
                 "document.body.setAttribute('data-plots-loaded',String(n));});</script>")
