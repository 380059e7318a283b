"""What vulture cannot see used in harness/, with the reason (read by vulture, never imported).

tests/test_lint.py runs ``vulture harness scripts tests/vulture_whitelist.py``: a definition that
nothing in the package or the benchmark scripts uses is dead code, unless it is listed here.
Add a name only with its reason.  The last group is code that only tests reach: not removed in
this step, each listed with what reaches it (candidates for removal, or for a caller).
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

# reached by tests only (not by the package or the scripts): what reaches it
command_paths  # harness/cli/reference.py: the command list tests/test_docs.py checks docs/cli.md against
schema_markdown  # harness/schema.py: the text tests/test_readme.py checks docs/schema.md against
port_attempts  # harness/engines/router.py: how many ports the router start took (tests/engines/test_router_port.py)
reconnects  # harness/engines/timed_http.py: reconnections of the timed client (tests/engines/test_timed_http.py)
drifting  # harness/history/gate_hook.py: HistoryBaseline.drifting, the drift check's answer
threshold_for  # harness/analysis/gate_config.py: a metric's band (the gate's config file, tests/analysis/test_compare_gate.py)
min_n_for_median_interval  # harness/analysis/intervals.py: the smallest n with a 95% interval (6), tested
constant_boundary  # harness/analysis/sequential.py: Pocock/OBF constants the tests check against published values
parse_output  # harness/engines/llama_idle.py: llama-idle's text output, tested on a real capture
parse_top_physmem  # harness/probes/macos.py: top's PhysMem line, tested on a real capture (the Mac path, issue 32)
read_evidence_table  # harness/repro/base.py: reads what write_evidence_table wrote (issue 31 item 2 reworks repro/)
quote_found  # harness/repro/claims.py (issue 31 item 2)
uncovered_names  # harness/repro/code_paths.py (issue 31 item 2)
missing_paths  # harness/repro/code_paths.py
stale_paths  # harness/repro/code_paths.py
source_root  # harness/repro/code_paths.py
check_section  # harness/repro/recipe.py
swap_specs_dir  # harness/resources.py: where the bundled swap specs are (tests/cli/test_swap_spec.py)
run_from_manifest  # harness/store.py: a Run from a manifest without a directory (tests/analysis/test_run_quality.py)
list_runs  # harness/store.py: every run under a results folder (tests/store/test_store.py)

# facts kept in typed records for the manifest, docs tables and tests (integration of #32, #34)
run_here  # harness/engines/backends.py: Backend.run_here, which backends run on this project's machines (docs/builds.md)
total_mib  # harness/engines/devices.py: Device.total_mib, from --list-devices, written into the manifest
free_mib  # harness/engines/devices.py: Device.free_mib, likewise
in_effect  # harness/probes/residency.py: the residency decision's field, written into each cell's startup_metal
PSTATE_UNKNOWN  # harness/probes/devices/nvml.py: NVML's P-state 32 (unknown), read by the parser's tests
DIFFERS  # harness/repro/figures.py: a figure whose shell and Python forms measure differently (docs/claims.md)
