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
from ampbench.core.records import (
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
    "ResultsError", "atomic_write_json", "atomic_write_text", "load_doc", "load_optional", "read_json", "read_text",
    "validate_doc", "write_doc", "os_reason", "safe_name", "new_run_dir", "sort_trials", "run_lock", "CHECK_SCHEMA", "RUN_SCHEMA", "TRIAL_SCHEMA", "AmpInfo", "Env", "EvalRecord", "Interference",
    "Memory", "RunInfo", "Status", "StepRecord", "Throughput", "Trial", "trial_key", "OpenRun", "RunDir",
    "check_belongs", "load_trial", "open_run", "suite_of", "load_summary", "summary_rows", "write_summary_csv",
    "LOG_TAIL_MARKER", "last_line", "new_run_id", "tail_lines", "utc_now",
]
