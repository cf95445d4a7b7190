"""The run reports a dashboard links (`ampbench publish`): found, copied into the site, never written elsewhere.

A run's report.html is found archived beside the history (HISTORY_DIR/reports/<suite>/<run_id>.html, where
`history append --archive-report` keeps it), in the run folder a history line names, or made from that run
folder. Publish writes nothing into a run folder: a report it makes is rendered inside the site it is building
and read back; each run folder is read at most once, for the one line whose run id its run.json holds. Every
page is read without following a link and must look like HTML (a link to a secret is never published).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ampbench.core.errors import ResultsError
from ampbench.core.files import atomic_write_bytes, ensure_folder, read_bytes
from ampbench.core.store import RunPaths
from ampbench.results.run_dir import RunDir


def slug(name: str) -> str:
    """A file-name-safe form of a suite or run id: long names keep a prefix plus a hash, so two ids
    never share a file and none exceeds the file-name limit."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", name).lstrip(".") or "suite"
    if len(s) > 96 or s != name:
        import hashlib

        s = f"{s[:80]}-{hashlib.sha256(name.encode('utf-8', 'surrogateescape')).hexdigest()[:12]}"
    return s


def archived_path(history: Path, suite: str, run_id: str) -> Path:
    return Path(history) / "reports" / slug(suite) / f"{slug(run_id)}.html"


def archive_report(run_dir: Path, history: Path) -> Path:
    """The run's self-contained report.html, copied beside the history so the dashboard can link it
    after the run folder is gone (nightly.sh commits it with the history). Read and written without
    following a link (in the run folder, or under the history folder)."""
    from ampbench.report.markdown import write_report

    src = write_report([Path(run_dir)], fmt="html")
    info = RunDir(run_dir).load_run()
    dst = archived_path(history, info.suite, info.run_id)
    atomic_write_bytes(dst, read_bytes(src, "report", root=Path(run_dir)), root=Path(history))
    return dst


def _report_html(path: Path, root: Path) -> bytes | None:
    """A report page's bytes, only if it is a regular file reached without a link below `root` and
    looks like HTML: a link to a secret (or to /proc/self/environ) is never published."""
    try:
        data = read_bytes(path, "report", root=root, limit=256 * 2**20)
    except ResultsError:
        return None
    return data if data.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")) else None


@dataclass
class ReportFinder:
    """Where publish finds each run's report page: archived beside the history, in the run folder a history
    line names, or made from that run folder.  Publish writes nothing into a run folder: a report it makes
    is rendered inside the site it is building (`scratch`, removed before the site is swapped in), and a run
    folder is read at most once, for the one line whose run id its run.json holds (100,000 lines naming one
    folder made 100,000 report copies: 7.5 min and 15 GB)."""

    history: Path
    scratch: Path
    folders: dict[str, str | None] = field(default_factory=dict)   # run_dir -> its run id (None: not a run)
    made: int = 0

    def find(self, entry: dict[str, Any]) -> bytes | None:
        archived = archived_path(self.history, entry["suite"], entry["run_id"])
        if os.path.lexists(archived):
            return _report_html(archived, Path(self.history))
        key = str(entry.get("run_dir") or "")
        if not key:
            return None
        if key not in self.folders:
            self.folders[key] = self._run_id(Path(key))
        if self.folders[key] != entry["run_id"]:
            return None   # not a run folder, or one that holds another run (or was published already)
        self.folders[key] = None
        run_dir = Path(key)
        html = RunPaths(run_dir).report_path(".html")
        if os.path.lexists(html):
            return _report_html(html, run_dir)
        return self._render(run_dir)

    @staticmethod
    def _run_id(run_dir: Path) -> str | None:
        if run_dir.is_symlink() or not RunPaths(run_dir).run_json.is_file():
            return None
        try:
            return RunDir(run_dir).load_run().run_id
        except ResultsError:
            return None

    def _render(self, run_dir: Path) -> bytes | None:
        """The run's report page made inside the site being built (its plots embedded), read, then removed."""
        from ampbench.report.markdown import write_report

        self.made += 1
        page_path = self.scratch / f"{self.made}.html"
        try:
            ensure_folder(self.scratch, self.scratch.parent)
            return _report_html(write_report([run_dir], output=page_path, fmt="html"), self.scratch)
        except ResultsError:
            return None
        finally:
            with contextlib.suppress(OSError):
                page_path.unlink()
            shutil.rmtree(self.scratch / f"{self.made}-plots", ignore_errors=True)


def copy_reports(entries: list[dict[str, Any]], finder: ReportFinder, output: Path) -> dict[str, str]:
    hist_root = finder.history
    links = {}
    archived: dict[str, set[str]] = {}
    for e in entries:
        folder = slug(e["suite"])
        if folder not in archived:  # one listing per suite instead of one lookup per run
            try:
                archived[folder] = set(os.listdir(hist_root / "reports" / folder))
            except OSError:
                archived[folder] = set()
        if not e.get("run_dir") and f"{slug(e['run_id'])}.html" not in archived[folder]:
            continue
        data = finder.find(e)
        if data is None:
            continue
        rel = Path("reports") / slug(e["suite"]) / f"{slug(e['run_id'])}.html"
        atomic_write_bytes(output / rel, data, root=output)
        links[e["run_id"]] = rel.as_posix()
    return links
