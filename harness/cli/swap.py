"""``lbench swap``: a swap storm against llama-server's router."""

from __future__ import annotations

import typer
from rich.table import Table

from harness.cli.options import Builds, LlamaServer, Report, ResultsDir, default
from harness.cli.ui import RichReporter, out
from harness.spec import SWAP_PATTERNS, SwapSpec

D = lambda name: default(SwapSpec, name)  # noqa: E731  (defaults live in SwapSpec only)


def swap(
    model: list[str] = typer.Option(None, "--model", "-m", help="GGUF path or alias; repeat (>= 2). "
                                                                f"Default: {', '.join(D('models'))}."),
    models_max: int = typer.Option(D("models_max"), "--models-max",
                                   help="Router cap on models loaded at once (0 = no cap)."),
    pattern: str = typer.Option(D("pattern"), "--pattern", help=f"One of: {', '.join(SWAP_PATTERNS)}."),
    requests: int = typer.Option(D("requests"), "--requests", "-n", help="Request budget."),
    duration: float = typer.Option(None, "--duration", help="Stop sending after this many seconds."),
    concurrency: int = typer.Option(D("concurrency"), "--concurrency", "-c", help="Requests in flight at once."),
    seed: int = typer.Option(D("seed"), "--seed", help="Seed for random patterns."),
    zipf_s: float = typer.Option(D("zipf_s"), "--zipf-s", help="Skew of the zipf pattern."),
    burst_k: int = typer.Option(D("burst_k"), "--burst-k", help="Distinct models per burst (burst pattern)."),
    n_predict: int = typer.Option(D("n_predict"), "--n-predict", help="Tokens decoded per request."),
    sleep_idle_seconds: str = typer.Option(None, "--sleep-idle-seconds", help="Router --sleep-idle-seconds (>= 1)."),
    stop_timeout: int = typer.Option(None, "--stop-timeout", help="Per-model preset stop-timeout (s; router "
                                                                   "default 10)."),
    ctx_size: int = typer.Option(D("ctx_size"), "--ctx-size", help="Context size of each child."),
    server_arg: list[str] = typer.Option(None, "--server-arg", help="Extra router argument; repeat."),
    sample_hz: float = typer.Option(D("sample_hz"), "--sample-hz", help="Process-tree sampling rate."),
    cache_state: str = typer.Option(D("cache_state"), "--cache-state",
                                    help="as-is, warm (read every model file in first) "
                                                                 "or cold (evict a model's file before each request "
                                                                 "that loads it; Linux)."),
    reuse_connections: bool = typer.Option(D("reuse_connections"), "--reuse-connections/--fresh-connections",
                                           help="Reuse keep-alive connections (reproduces the router dropping "
                                                "them); default: a fresh loopback connection per request."),
    engine: str = typer.Option(D("engine"), "--engine", help="llama-server (router mode) or mlx "
                                                                "(mlx_lm.server: one model, reloads on demand)."),
    results: ResultsDir = None,
    llama_server: LlamaServer = None,
    report: Report = True,
    build: Builds = None,
) -> None:
    """Swap storm: drive llama-server's router over several models and time every swap.

    The router gets a preset INI written by lbench, an empty LLAMA_CACHE and 127.0.0.1.
    lbench records every request, every /models/sse event and router log line, and the
    router's process tree (children alive, RSS) at --sample-hz.

    Examples:
      lbench swap                                        # 3 tiny models, round-robin
      lbench swap -m llama3.2-1b-q8 -m llama3.2-1b-q4 -m llama3.2-3b-q4 --models-max 1
      lbench swap --pattern burst --burst-k 3 -c 3 -n 60
      lbench swap --pattern zipf --zipf-s 1.3 --duration 120 -n 100000
      lbench swap --engine mlx -m tiny-f16 -m tiny-f16 -n 20   # mlx_lm.server reloads
    """
    defaults = SwapSpec()
    default_models = ["tiny-f16"] * 3 if engine == "mlx" else defaults.models
    spec = SwapSpec(engine=engine, models=model or default_models, models_max=models_max, pattern=pattern, requests=requests,
                    duration_s=duration, concurrency=concurrency, seed=seed, zipf_s=zipf_s, burst_k=burst_k,
                    n_predict=n_predict, sleep_idle_seconds=sleep_idle_seconds, stop_timeout_s=stop_timeout,
                    ctx_size=ctx_size, server_args=server_arg or [], sample_hz=sample_hz,
                    reuse_connections=reuse_connections, cache_state=cache_state)
    from harness.engines.builds import binaries

    servers = [str(b.path) for b in binaries(build, llama_server)] if build else [llama_server]
    failed = False
    for server in servers:
        failed |= _one_storm(spec, server, results, report)
    if failed:
        raise typer.Exit(1)


def _one_storm(spec, llama_server, results, report) -> bool:
    from harness.analysis.swap import summarize_swap
    from harness.report.render import render_report
    from harness.runs.swap import execute_swap, prepare_swap

    with RichReporter() as reporter:
        prep = prepare_swap(spec, llama_server=llama_server, results=results, reporter=reporter)
        run = execute_swap(prep, reporter)
    if report:
        out.print(f"report: {render_report(run)}", markup=False)
    out.print(f"run: {run.run_id} ({run.manifest['status']}) in {run.dir}", markup=False)
    summary = summarize_swap(run)
    table = Table(title=f"swap latency · run {run.run_id}")
    for col in ("class", "n", "p50 ms", "p90 ms", "p99 ms"):
        table.add_column(col, justify="right" if col != "class" else "left")
    for r in summary.latency.to_dict("records"):
        table.add_row(r["class"], str(r["n"]), f"{r['p50_ms']:.1f}", f"{r['p90_ms']:.1f}", f"{r['p99_ms']:.1f}")
    out.print(table)
    for finding in summary.findings:
        out.print(f"• {finding}", markup=False)
    return run.manifest["status"] != "complete"
