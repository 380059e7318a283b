"""What vulture cannot see used in harness/, with the reason (read by vulture, never imported).

tests/test_lint.py runs ``vulture harness scripts tests/vulture_whitelist.py``: a definition that
nothing in the package or the benchmark scripts uses is dead code, unless it is listed here.
Add a name only with its reason.  Code that only tests reach is not listed: it is given a caller in
the package, moved into the tests, or deleted (issue 31 item 5).
"""

# ruff: noqa
# Typer: commands and callbacks registered by decorators (@app.command, @app.callback)
_root  # harness/cli/__init__.py: the app's callback (--version)
baseline_save  # harness/cli/baseline.py
baseline_show  # harness/cli/baseline.py
history_add  # harness/cli/history.py
history_list  # harness/cli/history.py
history_query  # harness/cli/history.py
synth  # harness/cli/model.py
list_models  # harness/cli/model.py
history_key  # harness/cli/history.py
history_sign  # harness/cli/history.py
trust_add  # harness/cli/history.py
trust_remove  # harness/cli/history.py
trust_list  # harness/cli/history.py
_history_extra  # harness/cli/history.py: the history group's callback (says when the history extra is absent)

# signal handlers and context managers: the signature is the protocol's
signum  # harness/cli/__init__.py: _sigterm(signum, frame)
tb  # harness/runs/session.py: RunSession.__exit__(exc_type, exc, tb)

# protocols and annotations: named in string annotations and docstrings, implemented elsewhere
RunningServer  # harness/engines/base.py: the return type of Engine.start (a string annotation)
SwapBackend  # harness/engines/base.py: the interface of a swap storm's server (router, mlx)

# dataclass fields written into the manifest or read back by field name (asdict, templates)
ram_bytes  # harness/record.py: Host.ram_bytes
llama_idle_summaries  # harness/runs/idle.py: CellRecord, written into the manifest
sweep_wall_s  # harness/runs/idle.py: CellRecord
startup_metal  # harness/runs/idle.py: CellRecord
server_starts  # harness/runs/idle.py: IdleCell, written into the manifest; the idle report's cells table shows it
efficiency  # harness/runs/idle.py: CellRecord
env_overrides  # harness/runs/idle.py: CellRecord
start_outcome  # harness/repro/bisect.py: BisectResult, printed by lbench bisect
end_outcome  # harness/repro/bisect.py: BisectResult
start_failed  # harness/repro/lab.py: a step's record in recipe.sh
control_models_max  # harness/repro/router_scenarios.py: a scenario parameter read from the claim's [params]
EXIT_DIFFERENT  # harness/repro/recipe.py: recipe.sh's exit codes, documented beside the verdicts
EXIT_REPRODUCED  # harness/repro/recipe.py
plots_cached  # harness/history/trend.py: TrendSite, printed by scripts/bench_history.py

# set for a library that reads it
pre_tokenizer  # harness/models/mlx_synth.py: tokenizers.Tokenizer.pre_tokenizer

# a module's __getattr__ (PEP 562), called by Python
__getattr__  # harness/repro/lab.py (harness/repro/ is being reworked: issue 31 item 2)

# facts kept in typed records for the manifest, docs tables and tests (integration of #32, #34)
run_here  # harness/engines/backends.py: Backend.run_here, which backends run on this project's machines (docs/builds.md)
total_mib  # harness/engines/devices.py: Device.total_mib, from --list-devices, written into the manifest
free_mib  # harness/engines/devices.py: Device.free_mib, likewise
in_effect  # harness/probes/residency.py: the residency decision's field, written into each cell's startup_metal
PSTATE_UNKNOWN  # harness/probes/devices/nvml.py: NVML's P-state 32 (unknown), read by the parser's tests
DIFFERS  # harness/repro/figures.py: a figure whose shell and Python forms measure differently (docs/claims.md)
# the kinds' parts, named as strings by runkind.part("module:function") in harness/kinds/ (loaded when first
# used, so vulture cannot follow them); tests/test_kinds.py resolves every one
ab_section
calibrate_context
derive_tables
execute_gate_bench
execute_prepared_repro
execute_swap
gate_bench_section
idle_context
idle_medians
idle_metrics
idle_section
prepare_gate_bench
prepare_repro
repro_context
repro_section
swap_context
swap_metrics
swap_section
swap_settings
