"""Layer: results. The result-file contract (models), the one loader, the run folder, summary.csv.

Stable public paths: `ampbench.results.Trial`, `RunInfo`, `load_doc`, `open_run`, `RunDir`.
"""

from ampbench.core.docs import load_doc, load_optional, validate_doc, write_doc
from ampbench.core.errors import ResultsError
from ampbench.core.files import (
    LOG_TAIL_MARKER,
    atomic_write_json,
    atomic_write_text,
    last_line,
    os_reason,
    read_json,
    read_text,
    safe_name,
    tail_lines,
)
from ampbench.core.names import new_run_id, utc_now
from ampbench.record.models import (
    CHECK_SCHEMA,
    RUN_SCHEMA,
    TRIAL_SCHEMA,
    AmpInfo,
    Env,
    EvalRecord,
    Interference,
    Memory,
    RunInfo,
    Status,
    StepRecord,
    Throughput,
    Trial,
    trial_key,
)
from ampbench.results.run_dir import (
    OpenRun,
    RunDir,
    check_belongs,
    load_trial,
    new_run_dir,
    open_run,
    run_lock,
    sort_trials,
    suite_of,
)
from ampbench.results.summary import load_summary, summary_rows, write_summary_csv

__all__ = [
    "CHECK_SCHEMA",
    "LOG_TAIL_MARKER",
    "RUN_SCHEMA",
    "TRIAL_SCHEMA",
    "AmpInfo",
    "Env",
    "EvalRecord",
    "Interference",
    "Memory",
    "OpenRun",
    "ResultsError",
    "RunDir",
    "RunInfo",
    "Status",
    "StepRecord",
    "Throughput",
    "Trial",
    "atomic_write_json",
    "atomic_write_text",
    "check_belongs",
    "last_line",
    "load_doc",
    "load_optional",
    "load_summary",
    "load_trial",
    "new_run_dir",
    "new_run_id",
    "open_run",
    "os_reason",
    "read_json",
    "read_text",
    "run_lock",
    "safe_name",
    "sort_trials",
    "suite_of",
    "summary_rows",
    "tail_lines",
    "trial_key",
    "utc_now",
    "validate_doc",
    "write_doc",
    "write_summary_csv",
]
