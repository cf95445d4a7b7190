"""The short table printed at the end of a run: one row per trial."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ampbench.report.fmt import bytes_h
from ampbench.results import Trial


def print_trials(trials: list[Trial], console: Console) -> None:
    table = Table(title="trials", title_justify="left")
    for col in ("mode", "seed", "status", "samples/s", "peak memory", "metric", "AMP active"):
        table.add_column(col, justify="right" if col in ("seed", "samples/s", "peak memory") else "left")
    for t in trials:
        meta = t.config.get("suite")
        primary = str(meta.get("metric", "")) if isinstance(meta, dict) else ""
        metric = t.metrics.get(primary)
        mem = t.memory.peak_allocated_bytes or t.memory.rss_peak_bytes
        active = "yes" if t.amp.active else ("no (inactive on this device)" if t.amp.requested else "-")
        table.add_row(
            escape(t.mode), str(t.seed), t.status if t.status == "ok" else f"[red]{t.status}[/]",
            f"{t.throughput.samples_per_s:.1f}" if t.status == "ok" else "-",
            f"{bytes_h(mem)} ({t.memory.source})" if mem else "-",
            escape(f"{primary} {metric:.4f}") if metric is not None else "-", active,
        )
    console.print(table)
