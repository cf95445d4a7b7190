"""Names vulture (60% confidence) reports as unused that are used: one line each, with why.

Read by `vulture` (pyproject.toml [tool.vulture]; tests/test_dead_code.py), never imported or run.
Framework-called names (typer verbs, pydantic validators, `forward`, `model_config`, `schema_`) are
ignored by rule in pyproject.toml instead of listed here.  Remove a line when its name goes.
"""
# ruff: noqa
# mypy: ignore-errors

# Workload classes: loaded by dotted name from ampbench/workloads/__init__.py's BUILTIN table.
_.BertWorkload  # "ampbench.workloads.bert.workload:BertWorkload"
_.CTRWorkload  # "ampbench.workloads.ctr.workload:CTRWorkload"
_.ResNetWorkload  # "ampbench.workloads.resnet.workload:ResNetWorkload"
_.ToyWorkload  # "ampbench.workloads.toy:ToyWorkload"
_.CommandWorkload  # "ampbench.workloads.command.workload:CommandWorkload"

# typer calls the app's callback (cli.py: the options before the verb, --version).
_._root  # @app.callback()

# Fields of the files ampbench writes (docs/results-format.md, schemas/): read by users and tools, not by ampbench.
_.extra_per_s  # Throughput: per-second rates of a workload's extra units (tokens/s for bert)
_.sm_clock_max_mhz  # Interference: GPU evidence recorded for the reader of a disturbed trial
_.temperature_c_max  # Interference: as above
_.power_w_median  # Interference: as above
_.workload_info  # Trial: facts the workload reports (dataset sizes, vocabulary hash...)
_.created  # Baseline: when the baseline was saved
_.fp32_nan_inf  # diagnosis.json: ops whose FP32 output was already NaN/Inf
_.paddle_infinite_op_types  # diagnosis.json: Paddle compare_accuracy's own list, a cross-check
_.steps_done  # probe.json: steps an attempt ran before it ended
_.configured_batch  # probe.json: the batch size the suite asks for, where the search started
_.lo_s  # history line's StepTimeHist: read from the row dict by the dashboard (dashboard_interactive.histogram_figure)
_.width_s  # as above
_.cpus_seen  # trial JSON (interference): the CPUs a trial's threads were seen on, evidence for the reader
_.description  # suite file [suite] description: free text for the reader, left out of the config hash
_.loss_every_ms  # CommandParams: a retired [workload] key, declared so a suite setting it is refused naming it

# Attributes a library reads after ampbench sets them.
_.normalizer  # tokenizers.Tokenizer: the trainer's normaliser (wordpiece._pipeline)
_.pre_tokenizer  # tokenizers.Tokenizer: the trainer's pre-tokenizer (wordpiece._pipeline)
_._momentum  # paddle BatchNorm reads _momentum in forward (dbnet bn_momentum)

# Called from outside the package.
_.archive_report  # scripts/nightly.sh keeps each run's report.html beside the history
_.launch_in_process  # the in-process launcher: for tests and debugging (a breakpoint in a workload)
_.paired_ratio  # scripts/bench_overhead.py: the overhead ratio's interval and the pairs a 2% claim needs

_.unpatched  # scripts/bench_command_overhead.py --same-process: the hook's bare blocks put Paddle's own functions back

# core/wire.py: fields of the hook's event declarations (TypedDicts), read as dictionary keys, never as attributes.
_.cuda_env  # DeviceEvent: the CUDA variables NVML needs (trial/command_gpu.py reads start["cuda_env"])
_.optimizer_calls  # OpsEvent: the optimizer's op counts, apart
_.first_step  # OpsEvent: the first step of the op window
_.peak_allocated  # MemoryEvent: the window's allocated peak
_.peak_reserved  # MemoryEvent: the window's reserved peak
_.call  # AmpOrderEvent: "decorate" or "data_parallel"
_.after_data_parallel  # AmpOrderEvent: decorate() of a model a DataParallel already wraps
# Rendered into docs/checks.md and compared with it by tests/test_reason_codes.py (the table is generated).
_.reason_table  # ampbench/judge/rules/reasons.py
# Rendered into docs/checks.md and compared with it by tests/test_rule_traits.py (the table is generated).
_.traits_table  # ampbench/judge/rules/registry.py
# trial/emulate/api.py: the place AmpScaler.__init__ asks (`tracer._expected_place.is_gpu_place()`): Paddle calls them.
_.is_gpu_place  # _GpuPlace: AmpScaler.__init__ asks it
_.is_xpu_place  # _GpuPlace: AmpScaler.__init__ asks it
_.is_custom_place  # _GpuPlace: AmpScaler.__init__ asks it
