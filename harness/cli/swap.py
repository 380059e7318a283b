"""``lbench swap``: a swap storm against llama-server's router."""

from __future__ import annotations

import typer

from harness.cli.options import (BackendOpt, Builds, DeviceOpt, LlamaServer, Report, ResultsDir, UnsafeServerArg,
                                  UnsafeServerEnv, engines_with, select_device, shown)
from harness.cli.ui import RichReporter, out, print_wrapped
from harness.spec import SWAP_PATTERNS, SwapSpec

_D = SwapSpec()  # the defaults live in SwapSpec; the options below only override them (None = not given)


def swap(
    model: list[str] = typer.Option(None, "--model", "-m", help="GGUF path or alias; repeat (>= 2). "
                                                                f"{shown(', '.join(_D.models))}"),
    models_max: int = typer.Option(None, "--models-max", help="Router cap on models loaded at once (0 = no cap). "
                                                              f"{shown(_D.models_max)}"),
    pattern: str = typer.Option(None, "--pattern", help=f"One of: {', '.join(SWAP_PATTERNS)}. "
                                                        f"{shown(_D.pattern)}"),
    requests: int = typer.Option(None, "--requests", "-n", help=f"Request budget. {shown(_D.requests)}"),
    sequence: str = typer.Option(None, "--sequence", metavar="STEPS",
                                 help="A timed sequence instead of --pattern: MODEL@SECONDS steps after the start "
                                      "(A = first --model, B = second, or a model name), or @FILE with one step a "
                                      "line, e.g. --sequence 'A@0,B@0.1' (B 100 ms after A). " + shown("none")),
    stagger: float = typer.Option(None, "--stagger", metavar="SECONDS",
                                  help="Every model once, in --model order, SECONDS apart, e.g. --stagger 0.05. "
                                       + shown("none")),
    first_request: str = typer.Option(None, "--first-request", metavar="STATES",
                                      help="Instead of a storm, time the first request to each model after each "
                                           "starting state (cold, warm, evicted, slept; comma-separated), each on a "
                                           "fresh router, split into phases, e.g. --first-request cold,warm. "
                                           + shown("none (a storm)")),
    first_reps: int = typer.Option(None, "--first-reps", help="Repetitions of every first request (--first-request), "
                                                              f"e.g. --first-reps 10. {shown(_D.first_reps)}"),
    repeat: int = typer.Option(None, "--repeat", help="Storms of this spec one after the other, each on a fresh "
                                                      "router (its own run), e.g. --repeat 10. "
                                                      f"{shown(_D.repeat)}"),
    duration: float = typer.Option(None, "--duration", help="Stop sending after this many seconds."),
    concurrency: int = typer.Option(None, "--concurrency", "-c", help="Requests in flight at once. "
                                                                      f"{shown(_D.concurrency)}"),
    seed: int = typer.Option(None, "--seed", help=f"Seed for random patterns. {shown(_D.seed)}"),
    zipf_s: float = typer.Option(None, "--zipf-s", help=f"Skew of the zipf pattern. {shown(_D.zipf_s)}"),
    burst_k: int = typer.Option(None, "--burst-k", help="Distinct models per burst (burst pattern). "
                                                        f"{shown(_D.burst_k)}"),
    n_predict: int = typer.Option(None, "--n-predict", help=f"Tokens decoded per request. {shown(_D.n_predict)}"),
    sleep_idle_seconds: str = typer.Option(None, "--sleep-idle-seconds", help="Router --sleep-idle-seconds (>= 1)."),
    stop_timeout: int = typer.Option(None, "--stop-timeout", help="Per-model preset stop-timeout, seconds. "
                                                                   + shown("10, the router's own")),
    ctx_size: int = typer.Option(None, "--ctx-size", help="Context size of each child, at most each model's "
                                                          f"trained context. {shown(_D.ctx_size)}"),
    server_arg: list[str] = typer.Option(None, "--server-arg", help="Extra router argument; repeat (flags are "
                                                                    "checked against llama-server --help)."),
    sample_hz: float = typer.Option(None, "--sample-hz", help="Process-tree sampling rate, Hz. "
                                                              f"{shown(f'{_D.sample_hz:g}')}"),
    cache_state: str = typer.Option(None, "--cache-state", help="as-is, warm (read every model file in "
                                                                "first) or cold (evict a model's file before each "
                                                                f"request that loads it; Linux). {shown('as-is')}"),
    reuse_connections: bool = typer.Option(None, "--reuse-connections/--fresh-connections",
                                           help="Reuse keep-alive connections (reproduces the router dropping "
                                                "them), or a fresh loopback connection per request. "
                                                f"{shown('--fresh-connections')}"),
    request_timeout: float = typer.Option(None, "--request-timeout",
                                          help="Seconds one request may take, send to last byte, before it "
                                               "fails with cause deadline and the storm stops "
                                               "(docs/reliability.md). "
                                               + shown("derived from the model sizes and the concurrency, "
                                                       "at least 121 s")),
    engine: str = typer.Option(None, "--engine", help="An engine with the swap capability: "
                                                      f"{engines_with('swap')} (lbench engine list says how each "
                                                      "swaps: llama-server in router mode, mlx reloads on demand). "
                                                      f"{shown('llama-server')}"),
    unsafe_server_arg: UnsafeServerArg = None,
    unsafe_server_env: UnsafeServerEnv = None,
    spec_file: str = typer.Option(None, "--spec", help="Swap spec (TOML), a path or a bundled name; options "
                                                       "given here override it. "
                                                       f"{shown('experiments/swap/default.toml')}"),
    results: ResultsDir = None,
    llama_server: LlamaServer = None,
    report: Report = True,
    build: Builds = None,
    backend: BackendOpt = None,
    device: DeviceOpt = None,
    env_axis: list[str] = typer.Option(None, "--env-axis", metavar="NAME=V1,V2",
                                       help="An environment variable of the router as an axis: one storm per "
                                            "value (unset: not set), e.g. --env-axis GGML_VK_KEEPALIVE_MS=unset,"
                                            "30000. " + shown("none")),
    server_args_axis: list[str] = typer.Option(None, "--server-args-axis", metavar="ARGS",
                                               help="Extra router arguments as an axis: one storm per value (none: "
                                                    "no argument), e.g. --server-args-axis none "
                                                    "--server-args-axis='--cache-reuse 256'. " + shown("none")),
) -> None:
    """Swap storm: drive llama-server's router over several models and time every swap.

    The router gets a preset INI written by lbench, an empty LLAMA_CACHE and 127.0.0.1.
    lbench records every request, every /models/sse event and router log line, and the
    router's process tree (children alive, RSS) at --sample-hz.

    \b
    Examples:
      lbench swap                      # 3 tiny models, round-robin
      lbench swap -m llama3.2-1b-q8 -m llama3.2-1b-q4 -m llama3.2-3b-q4 \\
          --models-max 1
      lbench swap --pattern burst --burst-k 3 -c 3 -n 60
      # the first request: cold (cache cold, warm), after an eviction, a sleep:
      lbench swap -m llama3.2-1b-q8 -m tiny-q8 \\
          --first-request cold,warm,evicted,slept --first-reps 10
      # A, then B 100 ms later, on a cold router, 10 times:
      lbench swap -m tiny-q8 -m tiny-q4 --models-max 1 \\
          --sequence 'A@0,B@0.1' --repeat 10
      lbench swap --pattern zipf --zipf-s 1.3 --duration 120 -n 100000
      # mlx_lm.server reloads:
      lbench swap --engine mlx -m tiny-f16 -m tiny-f16 -n 20
      # a spec, one option overridden:
      lbench swap --spec experiments/swap/default.toml --pattern zipf
      # on the Vulkan build, one storm per knob value:
      lbench swap --backend vulkan --device 0 \\
          --env-axis GGML_VK_KEEPALIVE_MS=unset,30000
    """
    from harness.engines import registry
    from harness.resources import find_spec
    from harness.spec import load_swap_spec

    spec = load_swap_spec(find_spec(spec_file, "swap")) if spec_file else SwapSpec()
    if engine and not model and not spec_file:
        # each engine names the tiny models a bare `lbench swap` uses (mlx: three reloads of one preset)
        model = list(registry.get(engine, "--engine").default_swap_models)
    overrides = dict(engine=engine, models=model or None, models_max=models_max, pattern=pattern, requests=requests,
                     duration_s=duration, concurrency=concurrency, seed=seed, zipf_s=zipf_s, burst_k=burst_k,
                     n_predict=n_predict, sleep_idle_seconds=sleep_idle_seconds, stop_timeout_s=stop_timeout,
                     ctx_size=ctx_size, server_args=server_arg or None, sample_hz=sample_hz,
                     unsafe_server_args=unsafe_server_arg or None, unsafe_server_env=unsafe_server_env or None,
                     reuse_connections=reuse_connections, cache_state=cache_state,
                     request_timeout_s=request_timeout, sequence=sequence, stagger_s=stagger, repeat=repeat,
                     first_request=[x.strip() for x in first_request.split(",") if x.strip()] if first_request else None,
                     first_reps=first_reps)
    for key, value in overrides.items():
        if value is not None:
            setattr(spec, key, value)
    spec.validate(f"{spec_file} + command line" if spec_file else "command line")
    from harness import knob_axes
    from harness.engines.builds import binaries

    import copy

    storms = [spec]
    if env_axis or server_args_axis:  # one storm per combination, each checked before any runs
        import shlex

        arg_sets = [knob_axes.parse_server_args_value(a) for a in server_args_axis or []] or [()]
        storms = []
        for env in knob_axes.env_settings(env_axis or []):
            for args in arg_sets:
                s = copy.deepcopy(spec)
                s.env = [*spec.env, *(f"{k}={'unset' if v is None else v}" for k, v in env)]
                s.server_args = [*spec.server_args, *(a for a in args if a != "none")]
                label = ",".join([*s.env, *(["args=" + shlex.join(args)] if args else [])])
                s.name = f"{spec.name} {label}"[:100]
                storms.append(s.validate("command line"))
    servers = [str(b.path) for b in binaries(build, llama_server, backend)] if build or backend else [llama_server]
    select_device(backend, device, servers[0])
    failed = False
    for server in servers:
        for storm in storms:
            outcomes = []
            for i in range(storm.repeat):
                one = copy.deepcopy(storm)
                if storm.repeat > 1:
                    one.name = f"{storm.name} rep {i + 1}/{storm.repeat}"[:100]
                bad, outcome = _one_storm(one, server, results, report)
                failed |= bad
                outcomes.append(outcome)
            if storm.repeat > 1:
                print_wrapped(out, repetitions_line(outcomes))
    if failed:
        raise typer.Exit(1)


def repetitions_line(outcomes: list[tuple[str, str, dict[str, int]]]) -> str:
    """One line over the repetitions: how many ran clean, which errors the others met, their run ids."""
    clean = [run_id for run_id, status, kinds in outcomes if status == "complete" and not kinds]
    parts = [f"repetitions: {len(clean)} of {len(outcomes)} clean"]
    for run_id, status, kinds in outcomes:
        if run_id not in clean:
            what = ", ".join(f"{k} x{n}" for k, n in kinds.items()) or "no request failed"
            parts.append(f"{run_id} ({status}): {what}")
    return "; ".join(parts)


def _one_storm(spec: SwapSpec, llama_server: str | None, results: str | None, report: bool
               ) -> tuple[bool, tuple[str, str, dict[str, int]]]:
    from harness.analysis.persisted import load_analysis
    from harness.analysis.swap import summary_from_analysis
    from harness.report.render import render_report
    from harness.kinds import get
    from harness.runkind import RunOptions

    swap = get("swap")
    with RichReporter() as reporter:
        run = swap.execute(swap.prepare(spec, RunOptions(llama_server=llama_server, results=results), reporter),
                           reporter)
    report_path = render_report(run) if report else None
    summary = summary_from_analysis(load_analysis(run))
    from rich.table import Table
    table = Table(title=f"swap latency · run {run.run_id}")
    for col in ("class", "n", "p50 ms", "p90 ms", "p99 ms"):
        table.add_column(col, justify="right" if col != "class" else "left")
    group = None
    for r in summary.latency.to_dict("records"):
        if group is not None and r.get("group") != group:
            table.add_section()  # all | by what the router did | by residency at send
        group = r.get("group")
        table.add_row(r["class"], str(r["n"]), *(f"{r[k]:.1f}" if r["n"] else "-" for k in ("p50_ms", "p90_ms",
                                                                                          "p99_ms")))
    out.print(table)
    for finding in summary.findings:
        print_wrapped(out, f"• {finding}", rest="  ")
    if report_path is not None:  # where to look next: the last lines on the screen
        print_wrapped(out, f"report: {report_path}")
    print_wrapped(out, f"run: {run.run_id} ({run.record.status}) in {run.dir}")
    kinds = summary.figures.get("errors_by_kind") or {}
    return run.record.status != "complete", (run.run_id, str(run.record.status), dict(kinds))
