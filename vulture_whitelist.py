"""Names vulture (60% confidence) reports as unused that are used: one line each, with why.

Read by `vulture` (pyproject.toml [tool.vulture]; tests/test_dead_code.py), never imported or run.
Framework-called names (typer verbs, pydantic validators, `forward`, `model_config`, `schema_`) are
ignored by rule in pyproject.toml instead of listed here.  Remove a line when its name goes.
"""
# ruff: noqa
# mypy: ignore-errors

# pytest calls the plugin's hooks, fixtures and item methods (ampbench/pytest_plugin.py, the pytest11 entry point);
# a user's test calls assert_passed.
_.pytest_addoption  # a pytest hook: the --ampbench-* options
_.pytest_configure  # a pytest hook: the marker registered
_.pytest_collection_modifyitems  # a pytest hook: the suites as items
_.ampbench_result  # a fixture: pytest passes it to the test that names it
_.runtest  # pytest.Item
_.reportinfo  # pytest.Item
_.assert_passed  # SuiteResult: what a user's test calls

# typer's help formatter calls these on an argument (cli._PlainArgument: the name, not the Python type)
_.display_type_rich  # typer.core.TyperArgument.get_help_record
_._rich_display_name  # as above
_._usage_display_name  # typer's usage line
_.__class__  # cli._PlainCommand: each argument typer built becomes a _PlainArgument

# http.server calls it for each request (commands/serve.py: quiet)
_.log_message  # SimpleHTTPRequestHandler

# typer calls the app's callback (cli/base.py: the options before the verb, --version).
_._root  # @app.callback()

# The fields of the files ampbench writes and of the hook's wire are handed to vulture by tests/test_dead_code.py.
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
# trial/emulate/api.py: the place AmpScaler.__init__ asks (`tracer._expected_place.is_gpu_place()`): Paddle calls them.
_.is_gpu_place  # _GpuPlace: AmpScaler.__init__ asks it
_.is_xpu_place  # _GpuPlace: AmpScaler.__init__ asks it
_.is_custom_place  # _GpuPlace: AmpScaler.__init__ asks it
