"""`ampbench publish HISTORY_DIR -o SITE`: a static HTML dashboard of the nightly history, like `asv publish`.

One page per suite: throughput, peak memory, metric and verdict per mode over the runs (one figure,
embedded), a regression list naming the commit range between the last good and the first bad run,
and a table of runs linking each run's self-contained report.html.  Reports are found in
HISTORY_DIR/reports/<suite>/<run_id>.html (where nightly.sh archives them), in the run folder the
history line names, or made from that run folder when it still exists.  No script or file is fetched.
"""

from __future__ import annotations

import base64
import re
import shutil
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from ampbench.config import REFERENCE_MODE
from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_text
from ampbench.judge import changepoint
from ampbench.report import fmt
from ampbench.report.html import CSS as BASE_CSS
from ampbench.report.html import page
from ampbench.results.history import NOT_CHECKED, load_history
from ampbench.results.run_dir import RunDir

BAD = ("FAIL", "ERROR")
CSS = BASE_CSS + ".bad{color:#d62728;font-weight:bold}.ok{color:#2da44e}td.num{text-align:right}"


@dataclass
class Regression:
    mode: str
    good: int           # index of the last good run (-1: no good run before)
    bad: int            # index of the first bad run
    rules: list[str] = field(default_factory=list)


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name) or "suite"


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


def regressions(entries: list[dict[str, Any]]) -> list[Regression]:
    """Per mode, each switch from a run that was not flagged to one that was (FAIL/ERROR)."""
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


def commit_range(entries: list[dict[str, Any]], r: Regression, repo_url: str | None) -> str:
    """`abc1234..def5678` (a compare link when the repository URL is known)."""
    bad = entries[r.bad].get("git_sha") or ""
    good = entries[r.good].get("git_sha") if r.good >= 0 else ""
    if not bad:
        return "commit not recorded"
    if not good:
        return f"up to {escape(fmt.short_sha(bad, 10))} (no earlier good run)"
    text = f"{escape(fmt.short_sha(good, 10))}..{escape(fmt.short_sha(bad, 10))}"
    if repo_url and re.match(r"^https?://", repo_url):
        href = f"{repo_url.rstrip('/')}/compare/{good}...{bad}"
        return f'<a href="{escape(href, quote=True)}">{text}</a>'
    return text


def archived_path(history: Path, suite: str, run_id: str) -> Path:
    return Path(history) / "reports" / slug(suite) / f"{slug(run_id)}.html"


def archive_report(run_dir: Path, history: Path) -> Path:
    """The run's self-contained report.html, copied beside the history so the dashboard can link it
    after the run folder is gone (nightly.sh commits it with the history)."""
    from ampbench.report.markdown import write_report

    src = write_report([Path(run_dir)], fmt="html")
    info = RunDir(run_dir).load_run()
    dst = archived_path(history, info.suite, info.run_id)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


def find_report(entry: dict[str, Any], history: Path) -> Path | None:
    """The run's report.html: archived beside the history, in its run folder, or made from it."""
    archived = archived_path(history, entry["suite"], entry["run_id"])
    if archived.is_file():
        return archived
    run_dir = Path(entry.get("run_dir") or "")
    if entry.get("run_dir") and (run_dir / "report.html").is_file():
        return run_dir / "report.html"
    if entry.get("run_dir") and (run_dir / "run.json").is_file():
        from ampbench.report.markdown import write_report

        try:
            return write_report([run_dir], fmt="html")
        except ResultsError:
            return None
    return None


def publish(history: Path, output: Path, repo_url: str | None = None) -> Path:
    """Write SITE/index.html and SITE/<suite>.html (+ SITE/reports/...); returns the index."""
    history, output = Path(history), Path(output)
    hist_root = history if history.is_dir() else history.parent
    suites: list[tuple[str, list[dict[str, Any]]]] = []
    for path in history_files(history):
        entries = [e.to_json() for e in load_history(path)]  # rendered from plain rows
        if entries:
            suites.append((entries[-1]["suite"], entries))
    if not suites:
        raise ResultsError(f"{history}: the history holds no runs")
    output.mkdir(parents=True, exist_ok=True)
    rows = []
    for suite, entries in suites:
        links = _copy_reports(entries, hist_root, output)
        regs = regressions(entries)
        atomic_write_text(output / f"{slug(suite)}.html", suite_page(suite, entries, regs, links, repo_url))
        rows.append(_index_row(suite, entries, regs))
    body = ("<h1>ampbench dashboard</h1><p>Nightly AMP validation history, one page per suite. "
            "Verdict: the latest run's.</p><table><thead><tr><th>Suite</th><th>Runs</th><th>Latest run</th>"
            "<th>Latest verdict</th><th>Regressions</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    index = output / "index.html"
    atomic_write_text(index, page("ampbench dashboard", body + _CHECK_SCRIPT, CSS))
    return index


def _copy_reports(entries: list[dict[str, Any]], hist_root: Path, output: Path) -> dict[str, str]:
    links = {}
    for e in entries:
        src = find_report(e, hist_root)
        if src is None:
            continue
        rel = Path("reports") / slug(e["suite"]) / f"{slug(e['run_id'])}.html"
        (output / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, output / rel)
        links[e["run_id"]] = rel.as_posix()
    return links


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
               repo_url: str | None) -> str:
    from ampbench.report.dashboard_plots import suite_figure
    from ampbench.report.trend import inactive_note

    metric = next((e.get("metric") for e in reversed(entries) if e.get("metric")), "") or "metric"
    vals = [m.get("metric_mean") for e in entries for m in (e.get("modes") or {}).values()]
    frac = fmt.is_fraction_metric([x for x in vals if x is not None])
    steps = changepoint.all_steps(entries)
    cfg = changepoint.config_changes(entries)
    png = suite_figure(entries, metric, frac, [(r.good, r.bad) for r in regs if r.good >= 0], inactive_note(entries),
                       steps, [c.index for c in cfg])
    img = (f'<img class="plot" alt="{escape(suite, quote=True)}: throughput, memory, metric and verdict over runs" '
           f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">')
    parts = [f'<p><a href="index.html">all suites</a></p><h1>{escape(suite)}</h1>',
             f"<p>{len(entries)} runs; primary metric <code>{escape(metric)}</code>.</p>", img,
             "<h2>Regressions</h2>", _regressions_html(entries, regs, repo_url),
             "<h2>Steps in the series</h2>", _steps_html(entries, steps, cfg, repo_url),
             "<h2>Runs</h2>", _runs_table(entries, links, frac)]
    return page(f"ampbench: {suite}", "\n".join(parts) + _CHECK_SCRIPT, CSS)


def _steps_html(entries: list[dict[str, Any]], steps: list[changepoint.Step], cfg: list[changepoint.ConfigChange],
                repo_url: str | None) -> str:
    """Change points of each mode's throughput (a step need not have flipped a verdict) and config changes."""
    items = []
    for st in steps:
        r = Regression(st.mode, st.before, st.after)
        kind = "slowdown" if st.regression else "speedup"
        items.append(f'<li><code>{escape(st.mode)}</code>: <span class="{"bad" if st.regression else "ok"}">'
                     f"{escape(f'{st.change:+.1%}')} {kind}</span> between run {escape(st.run_before)} and "
                     f"{escape(st.run_after)}; commits {commit_range(entries, r, repo_url)}</li>")
    for c in cfg:
        items.append(f"<li>config changed at run {escape(str(entries[c.index].get('run_id', '')))} "
                     f"(<code>{escape(c.before)}</code> to <code>{escape(c.after)}</code>): another experiment, "
                     "not a regression</li>")
    if not items:
        return "<p>No step found in any mode's throughput (penalised segmentation, Welch-confirmed).</p>"
    return "<ul>" + "".join(items) + "</ul>"


def _regressions_html(entries: list[dict[str, Any]], regs: list[Regression], repo_url: str | None) -> str:
    if not regs:
        return "<p>No mode went from passing to FAIL/ERROR in this history.</p>"
    items = []
    for r in regs:
        good = escape(entries[r.good]["run_id"]) if r.good >= 0 else "none (flagged since the first run shown)"
        rules = f" ({escape(', '.join(r.rules))})" if r.rules else ""
        items.append(f"<li><code>{escape(r.mode)}</code>{rules}: last good run {good}, first bad run "
                     f"{escape(entries[r.bad]['run_id'])}; commits {commit_range(entries, r, repo_url)}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def _runs_table(entries: list[dict[str, Any]], links: dict[str, str], frac: bool) -> str:
    head = ("<tr><th>Started</th><th>Run</th><th>Commit</th><th>Mode</th><th>Samples/s</th><th>Peak memory</th>"
            "<th>Metric</th><th>Verdict</th></tr>")
    rows = []
    for e in reversed(entries):
        rid = escape(e["run_id"])
        run = f'<a href="{escape(links[e["run_id"]], quote=True)}">{rid}</a>' if e["run_id"] in links else rid
        for k, (mode, m) in enumerate((e.get("modes") or {}).items()):
            first = k == 0
            inactive = " (AMP inactive)" if m.get("amp_requested") and not m.get("amp_active") else ""
            rows.append(
                f"<tr><td>{escape(str(e.get('started') or '')[:16]) if first else ''}</td><td>{run if first else ''}</td>"
                f"<td>{_sha_html(e) if first else ''}</td>"
                f"<td><code>{escape(mode)}</code></td><td class=\"num\">{escape(fmt.num(m.get('samples_per_s')))}</td>"
                f"<td class=\"num\">{escape(fmt.bytes_h(m.get('peak_bytes')))}</td>"
                f"<td class=\"num\">{escape(fmt.metric_pm(m.get('metric_mean'), m.get('metric_std'), frac))}</td>"
                f"<td>{'reference' if mode == REFERENCE_MODE else _verdict_html(m.get('verdict'))}{inactive}</td></tr>")
    return f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def _sha_html(e: dict[str, Any]) -> str:
    return f"<code>{escape(fmt.short_sha(e.get('git_sha'), 10))}</code>" if e.get("git_sha") else ""


# Marks the page once every plot has decoded (the browser test reads it; readers never see it).
_CHECK_SCRIPT = ("<script>window.addEventListener('load',function(){var n=0;for(var i=0;i<document.images.length;i++)"
                 "{var im=document.images[i];if(im.complete&&im.naturalWidth>0)n++;}"
                 "document.body.setAttribute('data-plots-loaded',String(n));});</script>")
