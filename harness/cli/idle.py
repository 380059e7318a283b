"""``lbench idle`` (the idle-wake sweep) and ``lbench calibrate`` (the harness measuring itself)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from harness import resources
from harness.cli.options import (BackendOpt, Builds, DeviceOpt, LlamaServer, Report, ResultsDir, UnsafeServerArg,
                                  UnsafeServerEnv, default, engines_with, select_device, shown)
from harness.cli.ui import RichReporter, console, out, print_wrapped
from harness.spec import DEFAULT_MODEL, IdleSpec, load_spec, parse_pauses

if TYPE_CHECKING:  # heavy modules are imported where used, so `lbench --help` starts at once
    import pandas as pd
    from rich.console import Group
    from rich.table import Table

    from harness.store import Run


def _split(values: list[str] | None) -> list[str] | None:
    """Repeated options and comma lists both work: --keep-alive default,none."""
    if not values:
        return None
    return [v.strip() for item in values for v in str(item).split(",") if v.strip()]


def build_spec(spec_file: Path | None, **overrides: object) -> IdleSpec:
    """A spec from a TOML file or a bundled spec's name (harness.resources.find_spec), then the overrides."""
    if spec_file:
        spec_file = resources.find_spec(spec_file)
    spec = load_spec(spec_file) if spec_file else IdleSpec()
    for key, value in overrides.items():
        if value is not None:
            setattr(spec, key, value)
    if overrides.get("ctx_size") is not None:
        spec.ctx_size_given = True
    return spec.validate("command line" if not spec_file else f"{spec_file} + command line")


CELL_COLUMN_WIDTH = 24  # a "median [lo, hi]" figure; more cells than fit side by side: one row per cell and pause


def _summary_table(run: Run, width: int | None = None) -> Table | Group:
    """Median client latency per pause with its 95% interval: a column per cell when they fit in
    ``width`` (the console's), else one row per cell and pause, so no label is broken into letters."""
    from harness.analysis.frames import json_frame
    from harness.analysis.persisted import load_analysis
    from harness.units import ms

    summary = json_frame(load_analysis(run)["summary_latency"])
    from rich.table import Table
    table = Table(title=f"median client latency (ms) · run {run.run_id}")
    cells = list(dict.fromkeys(zip(summary["model"], summary["setting"])))

    def figure(m: pd.DataFrame) -> str:
        if not len(m):
            return "–"
        lo, hi = m["ci_low"].iloc[0], m["ci_high"].iloc[0]
        ci = f"[{ms(lo)}, {ms(hi)}]" if lo == lo and lo is not None else f"(n={m['n'].iloc[0]}, no CI)"
        return f"{ms(m['median'].iloc[0])} {ci}"

    width = width or out.width
    if 12 + CELL_COLUMN_WIDTH * len(cells) <= width:
        table.add_column("pause (s)", justify="right")
        for model, setting in cells:
            table.add_column(f"{model}\n{setting}", justify="right")
        for pause, g in summary.groupby("pause_requested_s"):
            table.add_row(f"{pause:g}", *(figure(g[(g["model"] == model) & (g["setting"] == setting)])
                                          for model, setting in cells))
        return table
    from rich.console import Group

    tables = []
    for model, setting in cells:  # a small table per cell: its name is a title, wrapped between words
        t = Table(title=f"{model} · {setting}: median client latency (ms) · run {run.run_id}")
        t.add_column("pause (s)", justify="right", no_wrap=True)
        t.add_column("median [95% CI]", justify="right", no_wrap=True)
        g = summary[(summary["model"] == model) & (summary["setting"] == setting)]
        for pause, p in g.groupby("pause_requested_s"):
            t.add_row(f"{pause:g}", figure(p))
        tables.append(t)
    return Group(*tables)


def _run(spec: IdleSpec, llama_server: str | None, results: str | None, kind: str, report: bool,
         llama_idle_path: str | None = None, engine_options: dict | None = None) -> tuple[Run, Path | None]:
    """Run the sweep; returns the run and its report's path (printed last by the caller)."""
    from harness.report.render import render_report
    from harness.kinds import get
    from harness.runkind import RunOptions

    run_kind = get(kind)
    options = RunOptions(llama_server=llama_server, results=results, llama_idle=llama_idle_path,
                         engine_options=dict(engine_options or {}))
    with RichReporter() as reporter:
        run = run_kind.execute(run_kind.prepare(spec, options, reporter), reporter)
    return run, (render_report(run) if report else None)


def print_outcome(run: Run, report_path: Path | None, sentences: list[str]) -> None:
    """The end of a run's output, in the order a person reads it: warnings (each once), the
    result in sentences, then where the report and the run are: the last lines on the screen."""
    for w in run.record.quality.warnings:
        print_wrapped(console, f"warning: {w}", rest="  ")
    noisy = [c for c in run.record.cells if c.self_check.get("warnings")]
    if noisy:
        print_wrapped(console, f"note: the self-check was over target in {len(noisy)} of "
                               f"{len(run.record.cells)} cells (the warnings above; the report's "
                               "banner has them)", rest="  ")
    for sentence in sentences:
        print_wrapped(out, sentence, rest="  ")
    if report_path is not None:
        print_wrapped(out, f"report: {report_path}")
    print_wrapped(out, f"run: {run.run_id} ({run.record.status}) in {run.dir}")


def findings(run: Run) -> list[str]:
    """The run's result in plain sentences (kept in analysis.json): the idle headline, per cell,
    from the one wake model; calibrate runs have findings in its place."""
    from harness.analysis.persisted import load_analysis

    analysis = load_analysis(run)
    return list(analysis.get("headline") or analysis.get("findings", []))


def idle(
    model: list[str] = typer.Option(None, "--model", "-m",
                                    help="GGUF path or alias; repeat for a matrix. The default is synthetic, "
                                         f"generated on first use. {shown(DEFAULT_MODEL)}"),
    pauses: str = typer.Option(None, "--pauses", help="Seconds: '0,0.5,1.2' or 'start:stop:step'. "
                                                     f"{shown('0-4 s, dense around 0.6-1.6 s')}"),
    reps: int = typer.Option(None, "--reps",
                                    help=f"Repetitions of the pause grid. {shown(default(IdleSpec, 'reps'))}"),
    warmup: int = typer.Option(None, "--warmup",
                                    help=f"Unmeasured warm-up requests. {shown(default(IdleSpec, 'warmup'))}"),
    seed: int = typer.Option(None, "--seed",
                                    help=f"Seed for the pause order. {shown(default(IdleSpec, 'seed'))}"),
    keep_alive: list[str] = typer.Option(None, "--keep-alive",
                                         help="Metal residency: default, none (GGML_METAL_NO_RESIDENCY=1), or "
                                              "seconds (GGML_METAL_RESIDENCY_KEEP_ALIVE_S). Repeat or comma-list. "
                                              f"{shown('default')}"),
    sleep_idle_seconds: list[str] = typer.Option(None, "--sleep-idle-seconds",
                                                 help="llama-server --sleep-idle-seconds (>= 1, or off). Repeat "
                                                      f"for a matrix. {shown('off')}"),
    cache_state: list[str] = typer.Option(None, "--cache-state",
                                          help="Page-cache state of the model file at server start: as-is, "
                                               "warm (read in first) or cold (evicted first, Linux "
                                               f"posix_fadvise). Repeat or comma-list for a matrix. {shown('as-is')}"),
    engine: list[str] = typer.Option(None, "--engine", help=f"{engines_with('idle')}; add "
                                                            "llama-idle (in-process reference) to llama-server "
                                                            f"for a cross-check. {shown('llama-server')}"),
    url: str = typer.Option(None, "--url", help="OpenAI-compatible server for --engine openai (loopback only)."),
    ollama_url: str = typer.Option(None, "--ollama-url", help="Ollama for --engine ollama (loopback only). "
                                                               f"{shown('http://127.0.0.1:11434')}"),
    prompt_cache_size: int = typer.Option(None, "--prompt-cache-size", help="mlx_lm.server --prompt-cache-size "
                                                                            "(0 turns its prefix cache off)."),
    llama_idle_path: str = typer.Option(None, "--llama-idle", help="Use this llama-idle binary."),
    ctx_size: int = typer.Option(None, "--ctx-size",
                                    help="Server context size, at most the model's trained context. "
                                         f"{shown(default(IdleSpec, 'ctx_size'))}"),
    server_arg: list[str] = typer.Option(None, "--server-arg", help="Extra llama-server argument; repeat (flags "
                                                                    "are checked against its --help)."),
    unsafe_server_arg: UnsafeServerArg = None,
    unsafe_server_env: UnsafeServerEnv = None,
    spec_file: Path = typer.Option(None, "--spec", help="Experiment spec: a TOML file, or a bundled spec by name: "
                                                       + ", ".join(resources.bundled_idle_specs())
                                                       + ". Options given here override it."),
    results: ResultsDir = None,
    llama_server: LlamaServer = None,
    report: Report = True,
    build: Builds = None,
    backend: BackendOpt = None,
    device: DeviceOpt = None,
    env_axis: list[str] = typer.Option(None, "--env-axis", metavar="NAME=V1,V2",
                                       help="An environment variable of the server as an axis (unset: not set); "
                                            "repeat for more, e.g. --env-axis GGML_VK_KEEPALIVE_MS=unset,30000. "
                                            f"{shown('none')}"),
    server_args_axis: list[str] = typer.Option(None, "--server-args-axis", metavar="ARGS",
                                               help="A set of extra server arguments as one axis value (none: no "
                                                    "argument); repeat per value, e.g. --server-args-axis none "
                                                    "--server-args-axis='--cache-reuse 256'. " + shown("none")),
    prompt_tokens: list[str] = typer.Option(None, "--prompt-tokens", metavar="N",
                                            help="New prompt tokens each request carries after the pause (0: "
                                                 "one-token cached decode; N: N tokens evaluated, no cache "
                                                 "reuse), e.g. --prompt-tokens 0,512. " + shown("0")),
    threads: list[str] = typer.Option(None, "--threads", help="CPU wake axis: llama-server -t/-tb (a number, or "
                                                           "'default': not passed); in a llama-idle cross-check "
                                                           "also llama-idle's thread count. Repeat or comma-list."),
    poll: list[str] = typer.Option(None, "--poll", help="CPU wake axis: llama-server --poll 0-100 (no effect in "
                                                     "OpenMP builds)."),
    cpu_strict: list[str] = typer.Option(None, "--cpu-strict", help="CPU wake axis: llama-server --cpu-strict 0/1."),
    prio: list[str] = typer.Option(None, "--prio", help="CPU wake axis: llama-server --prio -1..3."),
    cpu_mask: list[str] = typer.Option(None, "--cpu-mask", help="CPU wake axis: llama-server --cpu-mask (hex)."),
    cpus: list[str] = typer.Option(None, "--cpus", help="CPU wake axis: the whole server under taskset -c "
                                                     "(1, 0-1, 0+1)."),
    omp_wait: list[str] = typer.Option(None, "--omp-wait-policy", help="CPU wake axis: OMP_WAIT_POLICY of the "
                                                                    "server: active, passive or default."),
    omp_spincount: list[str] = typer.Option(None, "--omp-spincount", help="CPU wake axis: GOMP_SPINCOUNT of the "
                                                                         "server (spins before a futex sleep)."),
    match: str = typer.Option(None, "--match", help="llama-idle: the server does llama-idle's work (4 threads, "
                                                   "n_ctx 512, BOS at position 0, greedy)."),
    self_check: int = typer.Option(None, "--self-check", help="Back-to-back calibration requests at the start "
                                                             "of every cell (0 = off). "
                                                             f"{shown(default(IdleSpec, 'self_check'))}"),
    client_cpus: str = typer.Option(None, "--client-cpus", help="Opt-in: pin lbench itself to these CPUs "
                                                               "(recorded)."),
    client_nice: int = typer.Option(None, "--client-nice", help="Opt-in: nice value for lbench itself (recorded)."),
    client_spin: bool = typer.Option(None, "--client-spin/--no-client-spin",
                                     help="Opt-in: busy-poll the socket for each response (recorded)."),
    request_timeout: float = typer.Option(None, "--request-timeout",
                                          help="Seconds one request may take before its cell fails. "
                                               f"{shown('derived from the warm-up, at least 30 s')}"),
    cell_timeout: float = typer.Option(None, "--cell-timeout",
                                       help="Seconds one cell's sweep may take. "
                                            f"{shown('derived from the grid and the warm-up')}"),
    device_probes: str = typer.Option(None, "--device-probes",
                                      help="Device probes sampled through each pause: auto (every one available "
                                           "here), off, or a list, e.g. --device-probes nvml,fdinfo (lbench probes "
                                           f"lists them). {shown(default(IdleSpec, 'device_probes'))}"),
    device_interval: float = typer.Option(None, "--device-interval",
                                          help="Seconds between device readings (>= 0.1), e.g. --device-interval 1. "
                                               f"{shown(default(IdleSpec, 'device_interval_s'))}"),
    device_interleave: bool = typer.Option(None, "--device-interleave/--no-device-interleave",
                                           help="Sample devices in half the repetitions only (shuffled), to measure "
                                                "what sampling does to the wake penalty, e.g. --device-interleave. "
                                                f"{shown('off')}"),
) -> None:
    """Idle-wake sweep: pause, then decode one token with the prompt cached; repeat over a grid.

    A fresh llama-server is started for every (model, setting) cell. Nothing touches the
    server during a pause. Samples land in results/<run id>/ as they are measured.

    \b
    Examples:
      lbench idle                                   # default model and grid
      lbench idle --model llama3-8b-q8 --keep-alive default,none
      lbench idle -m tiny-q8 --pauses 0:2:0.25 --reps 10
      # a bundled spec, or a .toml path:
      lbench idle --spec llama-idle-classic -m ~/models/my.gguf
      lbench idle -m tiny-q8 --cache-state warm,cold   # page cache as a factor
      # cross-check against llama.cpp's own llama-idle:
      lbench idle -m tiny-q8 --engine llama-server --engine llama-idle
      # mlx_lm.server (needs: pip install 'lbench[mlx]'):
      lbench idle --engine mlx -m tiny-f16
      lbench idle --engine openai --url http://127.0.0.1:1234 -m my-model
      lbench idle --engine ollama -m llama3.1:8b --keep-alive 30
      # Ollama's 180 s (llama.cpp residency) and 300 s (keep_alive) steps:
      lbench idle --spec ollama-keep-alive
      # CPU wake axes:
      lbench idle -m tiny-q8 --threads 1,2 --omp-wait-policy default,active
      lbench idle -m tiny-q8 --engine llama-server --engine llama-idle \\
          --match llama-idle
      # a backend, a knob as an axis, prompt evaluation after idle:
      lbench idle -m tiny-q8 --backend vulkan --device 0 \\
          --env-axis GGML_VK_KEEPALIVE_MS=unset,30000 --prompt-tokens 0,512
      # device memory and clocks through the pause, sampling on/off interleaved:
      lbench idle -m tiny-q8 --device-probes auto --device-interleave
    """
    spec = build_spec(
        spec_file,
        models=model or None,
        pauses_s=parse_pauses(pauses) if pauses is not None else None,
        reps=reps, warmup=warmup, seed=seed,
        keep_alive=_split(keep_alive),
        sleep_idle_seconds=_split(sleep_idle_seconds),
        ctx_size=ctx_size, server_args=server_arg or None, unsafe_server_args=unsafe_server_arg or None,
        unsafe_server_env=unsafe_server_env or None,
        cache_state=_split(cache_state), engines=_split(engine),
        threads=_split(threads), poll=_split(poll), cpu_strict=_split(cpu_strict), prio=_split(prio),
        cpu_mask=_split(cpu_mask), cpus=_split(cpus), omp_wait=_split(omp_wait),
        omp_spincount=_split(omp_spincount), match=match,
        self_check=self_check, client_cpus=client_cpus, client_nice=client_nice, client_spin=client_spin,
        request_timeout_s=request_timeout, cell_timeout_s=cell_timeout,
        env_axis=env_axis or None, server_args_axis=server_args_axis or None, prompt_tokens=_split(prompt_tokens),
        device_probes=device_probes or ("auto" if device_interleave else None), device_interval_s=device_interval,
        device_interleave=device_interleave,
    )
    from harness.engines.builds import binaries

    servers = [str(b.path) for b in binaries(build, llama_server, backend)] if build or backend else [llama_server]
    select_device(backend, device, servers[0])
    failed = False
    for server in servers:
        run, report_path = _run(spec, server, results, "idle", report, llama_idle_path,
                                {"url": url, "ollama_url": ollama_url, "prompt_cache_size": prompt_cache_size})
        out.print(_summary_table(run))
        _print_self_checks(run)
        _print_perturbation(run)
        print_outcome(run, report_path, findings(run))
        failed |= run.record.status != "complete"
    if failed:
        raise typer.Exit(1)


def _print_perturbation(run: Run) -> None:
    """After a run with --device-interleave: what device sampling did to the wake penalty."""
    if run.record.config.get("device_interleave") is not True:
        return
    from harness.analysis.device import perturbation, perturbation_sentence

    for p in perturbation(run.table("samples")):
        print_wrapped(out, perturbation_sentence(p), rest="  ")


def _print_self_checks(run: Run) -> None:
    for cell in run.record.cells:
        check = cell.get("self_check")
        if not check:
            continue
        fmt = lambda v: "–" if v is None else f"{v:.3f}"  # noqa: E731
        line = (f"self-check {cell['model']} / {cell['setting']}: overhead p50 {fmt(check['overhead_p50_ms'])} "
                f"p99 {fmt(check['overhead_p99_ms'])} ms, HTTP floor p50 {fmt(check['floor_http_p50_ms'])} ms, "
                f"harness p50 {fmt(check.get('harness_p50_ms'))} ms (n={check['n']})")
        print_wrapped(out, line, rest="  ")  # its warnings were printed once, as the cell ran


def calibrate(
    model: str = typer.Option("tiny-q8", "--model", "-m", help="Model (a tiny one isolates the harness)."),
    reps: int = typer.Option(10, "--reps", help="Repetitions of the block (30 back-to-back + 5 short pauses)."),
    results: ResultsDir = None,
    llama_server: LlamaServer = None,
    client_cpus: str = typer.Option(None, "--client-cpus", help="Opt-in: pin lbench itself to these CPUs."),
    client_nice: int = typer.Option(None, "--client-nice", help="Opt-in: nice value for lbench itself."),
    client_spin: bool = typer.Option(False, "--client-spin/--no-client-spin",
                                     help="Opt-in: busy-poll the socket for each response."),
    cpus: str = typer.Option(None, "--cpus", help="Run the server under taskset -c (e.g. 1)."),
    threads: str = typer.Option(None, "--threads", help="llama-server -t/-tb."),
    device_probes: str = typer.Option("off", "--device-probes",
                                      help="Device probes sampled through the pauses, e.g. --device-probes auto "
                                           "(auto, off or a list; lbench probes lists them)."),
) -> None:
    """Measure the harness itself against the real server (a benchmark, not a test).

    Prints: client wall minus server time per steady back-to-back request (p50/p99; an upper
    bound on the harness's own cost), the same after short pauses (includes the server
    waking its threads), requested-vs-actual pause error (p99), and sweep efficiency =
    wall / (sum of pauses + sum of server time), the HTTP floor (GET /health on the same
    connection, back to back and after the same pauses), harness = lbench's own work on the
    timed path (measured per request), and beyond floor = overhead - HTTP floor (the server's
    untimed completion work plus the harness).
    Targets: overhead p50 0.5 / p99 2 ms, harness p50 0.2 ms, pause error p99 1 ms, efficiency 1.03.

    \b
    Examples:
      lbench calibrate
      lbench calibrate --reps 100
      # opt-in placement A/B:
      lbench calibrate --client-cpus 0 --cpus 1 --client-spin
    """
    from harness.analysis.calibration import CALIBRATION_PAUSES, TARGETS
    from harness.analysis.persisted import load_analysis
    from harness.atomic import atomic_write_json

    spec = build_spec(None, models=[model], pauses_s=list(CALIBRATION_PAUSES), reps=reps, warmup=5, shuffle=False,
                      client_cpus=client_cpus, client_nice=client_nice, client_spin=client_spin,
                      cpus=[cpus] if cpus else None, threads=[threads] if threads else None,
                      device_probes=device_probes)
    run, report_path = _run(spec, llama_server, results, "calibrate", report=True)
    figures = {k: float("nan") if v is None else v  # analysis.json writes a figure not measured as null
               for k, v in load_analysis(run)["calibration"].items()}
    from rich.table import Table
    table = Table(title=f"harness calibration · run {run.run_id} · {int(figures['n'])} requests")
    table.add_column("figure")
    table.add_column("measured", justify="right")
    table.add_column("target", justify="right")
    table.add_column("")
    failed = []
    for key, target in TARGETS.items():
        value = figures[key]
        if value != value:
            table.add_row(key, "–", f"<= {target}", "not measured")
            continue
        ok = value <= target
        if not ok:
            failed.append(key)
        table.add_row(key, f"{value:.3f}", f"<= {target}", "[green]ok[/green]" if ok else "[red]over[/red]")
    table.add_row("n steady back-to-back", f"{int(figures['n_back_to_back'])}", "", "")
    table.add_row("overhead_p99_ms where server time was undisturbed (info)",
                  f"{figures['overhead_p99_undisturbed_ms']:.3f}", "", f"{int(figures['n_disturbed'])} disturbed")
    table.add_row("overhead_after_pause_p50_ms (info)", f"{figures['overhead_after_pause_p50_ms']:.3f}", "", "")
    table.add_row("overhead_after_pause_p99_ms (info)", f"{figures['overhead_after_pause_p99_ms']:.3f}", "", "")
    table.add_row("server_ms_p50 (for scale)", f"{figures['server_ms_p50']:.3f}", "", "")
    for key in ("floor_p50_ms", "floor_p99_ms", "floor_after_pause_p50_ms", "floor_after_pause_p99_ms",
                "harness_p99_ms", "harness_after_pause_p50_ms", "harness_after_pause_p99_ms",
                "beyond_floor_p50_ms", "beyond_floor_p99_ms"):
        table.add_row(f"{key} (info)", f"{figures[key]:.3f}", "", "")
    for key, what in (("efficiency_server_untimed", "server untimed + HTTP"), ("efficiency_client", "lbench client"),
                      ("efficiency_between", "between requests")):
        value = figures.get(key, float("nan"))
        table.add_row(f"efficiency excess: {what} (info)", "–" if value != value else f"{value:+.3f}", "", "")
    out.print(table)
    atomic_write_json(run.dir / "calibration.json", {"run_id": run.run_id, **figures})
    console.print(f"figures saved to {run.dir / 'calibration.json'}", markup=False)
    print_outcome(run, report_path, findings(run))
