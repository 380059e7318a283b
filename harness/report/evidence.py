"""``lbench evidence``: a Markdown bundle to paste into a GitHub issue.

One-line summary, the exact command, the table, the key plot as a PNG next to it,
and the environment in a collapsed ``<details>`` block.  Home paths, user names and
host names are redacted by default.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.analysis import stats
from harness.analysis.persisted import with_analysis
from harness.atomic import atomic_dir, atomic_write_text
from harness.errors import BadInput
from harness.untrusted import inside as untrusted_inside, read_bytes
from harness import schema, shell
from harness.runkind import find_kind
from harness.terminal import printable
from harness.report.redact import Redactor
from harness.store import Run
from harness.analysis.frames import json_frame
from harness.report.plots import latency_vs_pause
from harness.report.rerun import idle_script, swap_script
from harness.analysis.swap import summary_from_analysis

if TYPE_CHECKING:
    import pandas as pd
from harness.analysis.swap_served import storm_events
from harness.report.swap import timeline_png
from harness.report.render import render_report
from harness.report.ab import ab_context, rerun_script
from harness.report.gate_bench import GATE_FIGURES, gate_bench_context
from harness.analysis.device import perturbation, perturbation_sentence, setting_table
from harness.report.device import device_vs_pause_png, setting_markdown
from harness.report.repro import evidence_links
from harness.probes.host import virtual_status


def md(value: object) -> str:
    """A user string (model name, setting, note, reason) made inert in Markdown outside code
    blocks: no HTML, and a pipe cannot split a table cell; control characters escaped and a huge
    value cut with a marker (harness/terminal.py)."""
    return (printable(value).replace("&", "&amp;").replace("`", "'").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|").replace("\n", " "))


def file_stem(text: object) -> str:
    """A run id or model name as part of a file name in the bundle: letters, digits, ``. _ -``
    only, no leading dot, at most 80 characters (a manifest's ``run_id`` of ``../x`` or ``/etc/x``
    cannot name a file outside the output directory)."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", str(text))[:80].lstrip(".")
    return stem or "_"


RECIPE_MAX_BYTES = 1 << 20


def _recipe_text(path: Path) -> str | None:
    """A claim's ``recipe.sh``, read only when it is a regular file (never through a link: a
    hostile run's ``recipe.sh -> ~/.ssh/id_rsa`` would paste the key into the bundle) and small."""
    try:
        return read_bytes(path, max_bytes=RECIPE_MAX_BYTES, what="recipe.sh").decode(errors="replace")
    except BadInput:
        return None


def _script_block(title: str, name: str, text: str) -> list[str]:
    return [f"<details><summary>{title} (<code>{name}</code>, written next to this file)</summary>", "",
            "```sh", text.rstrip(), "```", "", "</details>", ""]


def idle_section(run: Run, analysis: dict, out_dir: Path) -> tuple[str, list[str]]:
    """The headline (the one wake model's answer, with intervals), the per-pause table, the plot,
    and per cell a script that reruns it without lbench and checks its own result."""

    summary = json_frame(analysis["summary_latency"])
    samples = run.table("samples")
    good = stats.measured(samples)
    wake, per_gb = analysis["wake"], analysis["per_gb"]
    headline = list(analysis.get("headline") or [])
    lines = [f"- {md(h)}" for h in headline]
    for g in per_gb:
        lines.append(f"- penalty per GB, {md(g['setting'])}: {g['slope_ms_per_gb']:.1f} ms/GB (95% CI "
                     f"{g['slope_ci'][0]:.1f}–{g['slope_ci'][1]:.1f}, R² {g['r2']:.2f}, {g['n_models']} models)")
    lines += [f"- method: {md(f)}" for f in analysis.get("findings", [])]
    table = ["| model | setting | pause (s) | n | median (ms) | 95% CI | mean ± sd |", "|---|---|---|---|---|---|---|"]
    for r in summary.to_dict("records"):
        ci = "–" if r["ci_low"] is None or r["ci_low"] != r["ci_low"] else f"{r['ci_low']:.2f}–{r['ci_high']:.2f}"
        table.append(f"| {md(r['model'])} | {md(r['setting'])} | {r['pause_requested_s']:g} | {r['n']} | {r['median']:.2f} | "
                     f"{ci} | {r['mean']:.2f} ± {r['sd']:.2f} |")
    lines += ["", *table]  # the headline above already says what the first and last pauses show
    files = []
    for model in dict.fromkeys(good["model"]) if not good.empty else []:
        name = f"{file_stem(run.run_id)}-{file_stem(model)}.png"
        (out_dir / name).write_bytes(latency_vs_pause(good, summary, model, run.run_id, wake=wake))
        files.append(name)
    device_lines, device_files = device_section(run, samples, out_dir)
    lines += device_lines
    files += device_files
    lines.append("")
    by_cell = {(w["model"], w["setting"]): (w, h) for w, h in zip(wake, headline)}
    for cell in run.record.cells:
        if not cell.get("argv"):
            continue
        w, h = by_cell.get((cell.get("model"), cell.get("setting")), (None, None))
        name = f"rerun-{file_stem(run.run_id)}-cell{cell.index:02d}.sh"
        text = idle_script(run.run_id, run.record, cell, samples, w, h)
        (out_dir / name).write_text(text)
        lines += _script_block(f"Rerun {md(cell.get('model'))} / {md(cell.get('setting'))} without lbench", name, text)
    return "\n".join(lines), files


def device_section(run: Run, samples: pd.DataFrame, out_dir: Path) -> tuple[list[str], list[str]]:
    """Device sampling: the perturbation check (interleaved runs), the per-setting before/after table
    (device memory during the longest pause, the request after it) and memory across the pause."""
    dev = run.table("device_samples")
    lines = [""] + [f"- {md(perturbation_sentence(p))}" for p in perturbation(samples)]
    lines += [""] + setting_markdown(setting_table(samples, dev), run.run_id, md)
    files = []
    good = stats.measured(samples)
    for model in dict.fromkeys(good["model"]) if not good.empty else []:
        png = device_vs_pause_png(good, dev, model, run.run_id)
        if png is not None:
            name = f"{file_stem(run.run_id)}-{file_stem(model)}-device.png"
            (out_dir / name).write_bytes(png)
            files.append(name)
    return lines, files


def swap_section(run: Run, analysis: dict, out_dir: Path) -> tuple[str, list[str]]:
    s = summary_from_analysis(analysis)
    lines = [f"- {md(f)}" for f in s.findings]
    table = ["| requests | n | p50 (ms) | p90 (ms) | p99 (ms) |", "|---|---|---|---|---|"]
    for r in s.latency.to_dict("records"):
        if r["n"]:
            table.append(f"| {r['class']} | {r['n']} | {r['p50_ms']:.1f} | {r['p90_ms']:.1f} | {r['p99_ms']:.1f} |")

    name = f"{file_stem(run.run_id)}-timeline.png"
    (out_dir / name).write_bytes(timeline_png(run, storm_events(run.table("events")), run.table("memory"),
                                              run.table("requests"),
                                              int(run.record.config.get("models_max", 0)), s.served))
    parts = lines + [""] + table + [""]
    if run.record.section("router").get("argv"):
        script = f"rerun-{file_stem(run.run_id)}.sh"
        text = swap_script(run.run_id, run.record, run.table("requests"), list(s.findings))
        (out_dir / script).write_text(text)
        parts += _script_block("Rerun the storm without lbench", script, text)
    return "\n".join(parts), [name]


def repro_section(run: Run, analysis: dict, out_dir: Path) -> tuple[str, list[str]]:
    """Per claim: verdict, plain reason, expected vs observed, model provenance, source reference,
    the standalone shell recipe (no lbench needed) and the raw logs' paths."""
    v = run.table("verdicts")
    table = ["| claim | verdict | measured / why |", "|---|---|---|"]
    records = schema.records(v)
    for r in records:
        verdict = r["verdict"] + (f" ({r['cause']})" if r.get("cause") else "")
        table.append(f"| {md(r['claim_id'])} | {md(verdict)} | {md(r['reason'])} |")
    engine = run.record.engine.facts
    parts = ["\n".join(table), ""]
    for r in records:
        parts += [f"#### {md(r['claim_id'])}: {md(r['verdict'])}", "", f"Claim: {md(r['claim'])}", "",
                  f"Source ({md(r.get('seed'))}): \"{md(r.get('statement'))}\""
                  + (f" — code: `{md(r['source_ref'])}`" if r.get("source_ref") else ""), "", f"Why: {md(r['reason'])}", ""]
        checks = json.loads(r.get("checks") or "[]") if isinstance(r.get("checks"), str) else []
        if checks:
            parts += ["| check | expected | observed | met |", "|---|---|---|---|"]
            parts += [f"| `{md(c.get('check'))}` | {md(c['expected'])} | {md(c['observed'])} | {md(c['met'])} |" for c in checks]
            parts.append("")
        models = json.loads(r.get("models") or "[]") if isinstance(r.get("models"), str) else []
        for m in models:
            synthetic = "synthetic (random weights), " if m.get("synthetic") else ""
            parts.append(f"- model `{md(m.get('label', m.get('ref')))}`: {synthetic}"
                         f"{md(m.get('bytes'))} bytes, sha256 `{md(m.get('sha256'))}`")
        parts.append(f"- engine: llama-server build {engine.get('build_number')} ({engine.get('backend')}), "
                     f"{engine.get('source_package', 'source: ' + str(engine.get('source')))}, "
                     f"sha256 `{md(engine.get('sha256'))}`")

        links = evidence_links(run.dir, r.get("evidence_dir"))  # a path from a table: plain names inside the run
        claim_dir = run.dir / str(r.get("evidence_dir") or "") if links else run.dir / ".none"
        inside = bool(links) and untrusted_inside(run.dir, claim_dir) and claim_dir.is_dir()
        recipes = claim_recipes(run.dir, claim_dir) if inside else []
        logs = [f"{r.get('evidence_dir')}/{name}" for _, name in links if name.endswith(".log")]
        if logs:
            parts.append("- raw logs: " + ", ".join(f"`{md(x)}`" for x in logs))
        parts.append("")
        parts += _recipe_blocks(claim_dir, recipes, r.get("verdict"))
    return "\n".join(parts), []


def gate_bench_section(run: Run, analysis: dict, out_dir: Path) -> tuple[str, list[str]]:
    """The findings, then the rates per condition (real runs) or the simulated gate cells."""
    context = gate_bench_context(run, analysis)
    parts = [f"- {md(f)}" for f in context["findings"]] + [""]
    if not context["simulated"]:
        parts += ["| condition | decisions | failed | rate [95% interval] |", "|---|---|---|---|"]
        for r in context["rates"]:
            rate = ("–" if r.get("rate") is None else
                    f"{r['rate']:.0%} [{r['rate_ci_low']:.0%}, {r['rate_ci_high']:.0%}]")
            parts.append(f"| {md(r.get('condition'))} ({md(r.get('measures'))}) | {md(r.get('decisions'))} | "
                         f"{md(r.get('failed'))} | {rate} |")
        return "\n".join(parts), []
    parts += ["Simulated runs, not timings.", "", "| spread | rule | runs per side | " + " | ".join(GATE_FIGURES) + " |",
              "|---|---|---|" + "---|" * len(GATE_FIGURES)]
    for c in context["gate_cells"]:
        parts.append(f"| {md(c.get('spread'))} | {md(c.get('rule'))} | {md(c.get('runs_per_side'))} | "
                     + " | ".join(md(t) for t in c["rates"]) + " |")
    return "\n".join(parts), []


def ab_section(run: Run, analysis: dict, out_dir: Path) -> tuple[str, list[str]]:
    """A gate job: the verdict with its interval and the A/A floor beside it, both builds and the model,
    the interleaved rounds with per-round ratios, and a script that reruns the job."""
    c = ab_context(run, analysis)
    parts = [f"**Verdict: {md(c['verdict_words'])}**", ""] + [f"- {md(f)}" for f in c["findings"]] + [""]
    parts += ["| group | contrast | ratio | interval | margin | verdict |", "|---|---|---|---|---|---|"]
    for r in c["b_rows"] + c["aa_rows"]:
        parts.append(f"| {md(r.get('group'))} | {md(r.get('contrast'))} | {r['ratio']:.3f} | "
                     f"[{r['ratio_ci_low']:.3f}, {r['ratio_ci_high']:.3f}] | ±{r['margin']:.1%} | {md(r.get('verdict'))} |")
    parts += ["", "The A/A row is a second copy of A in the same rounds (true ratio 1): the noise floor of this machine "
              "during this job.", "", "| side | build | commit | llama-server sha256 | extra arguments | model sha256 |",
              "|---|---|---|---|---|---|"]
    for name, s in (("A", c["side_a"]), ("B", c["side_b"])):
        models = "; ".join(f"{md(m.get('label'))} `{md(m.get('sha256'))}`" for m in s["models"])
        parts.append(f"| {name} | {md(s['build'])} ({md(s['version'])}) | `{md(s['commit'])}` | `{md(s['sha256'])}` | "
                     f"`{md(s['extra_args'])}` | {models} |")
    parts += ["", "| group | round | order | A (ms) | A/A (ms) | B (ms) | B / A | A/A / A |", "|---|---|---|---|---|---|---|---|"]

    def num(v: object, spec: str) -> str:
        return "–" if not isinstance(v, (int, float)) or v != v else format(v, spec)
    for r in c["per_round"]:
        parts.append(f"| {md(r.get('group'))} | {r.get('round')} | {md(r.get('order'))} | {num(r.get('a_ms'), '.2f')} | "
                     f"{num(r.get('aa_ms'), '.2f')} | {num(r.get('b_ms'), '.2f')} | {num(r.get('b_over_a'), '.3f')} | "
                     f"{num(r.get('aa_over_a'), '.3f')} |")
    name = f"rerun-{file_stem(run.run_id)}.sh"
    text = rerun_script(run, command_text(run.record.command))
    (out_dir / name).write_text(text)
    parts += [""] + _script_block("Rerun the gate job", name, text)
    return "\n".join(parts), []


def claim_recipes(run_dir: Path, claim_dir: Path) -> list[Path]:
    """The recipes a claim's verdict rests on: ``claims/<id>/recipe.sh``, or one per repetition
    (``rep-N/recipe.sh``, in repetition order).  Not the recipes of a scenario's single routers
    (``control/``, ``case/``: the claim's own recipe runs them all) nor of failed attempts."""
    own = claim_dir / "recipe.sh"
    if untrusted_inside(run_dir, own) and own.is_file():
        return [own]
    reps = [d for d in claim_dir.glob("rep-*") if re.fullmatch(r"rep-[0-9]+", d.name) and d.is_dir()]
    reps.sort(key=lambda d: int(d.name[4:]))
    found = [d / "recipe.sh" for d in reps]
    if not found:  # a run from before the claim's own recipe covered its several routers
        found = sorted(d / "recipe.sh" for d in claim_dir.iterdir() if d.is_dir() and not d.name.startswith("failed-"))
    return [p for p in found if untrusted_inside(run_dir, p) and p.is_file()]


def _recipe_blocks(claim_dir: Path, recipes: list[Path], verdict: object) -> list[str]:
    """One collapsed block per recipe; for a repeated claim, every repetition's, with how lbench
    combined their verdicts (each script compares its own verdict with that repetition's)."""
    read = [(p, _recipe_text(p)) for p in recipes]
    texts = [(p, t) for p, t in read if t is not None]
    if not texts:
        return []
    parts: list[str] = []
    if len(texts) > 1:
        parts += [f"Rerun without lbench: {len(texts)} scripts, one per repetition. Each runs its repetition against "
                  "a fresh router and exits 0 when its verdict is the one lbench found for that repetition; lbench's "
                  f"verdict over all of them ({md(verdict)}) is \"holds\" when every check is met in every repetition, "
                  "\"contradicted\" when some check fails in all of them, else \"inconclusive\".", ""]
    for i, (path, text) in enumerate(texts, start=1):
        where = md(path.relative_to(claim_dir).as_posix())
        title = (f"Rerun without lbench ({where}, repetition {i} of {len(texts)})" if len(texts) > 1
                 else f"Rerun without lbench ({where})")
        parts += [f"<details><summary>{title}</summary>", "", *shell.fence(text.rstrip(), "sh"), "", "</details>", ""]
    return parts


def _section(run: Run, section_of: Callable[[Run, dict, Path], tuple[str, list[str]]], out_dir: Path
             ) -> tuple[str, list[str]]:
    def use(analysis: dict) -> tuple[str, list[str]]:
        return section_of(run, analysis, out_dir)

    return with_analysis(run, use)


def _summary_line(run: Run) -> str:
    r = run.record
    models = ", ".join(f"{md(x.label)}{' (synthetic)' if x.synthetic else ''}" for x in r.models)
    where = md(f"{r.host.cpu_model or '?'} · {r.host.os or '?'} · {r.engine.name} {r.engine.build_label}")
    kind = find_kind(r.kind)
    what = kind.title if kind is not None else r.kind
    return f"**{what}** of {models or 'the engine'} on {where} (run `{md(run.run_id)}`, {md(r.status)})"


def _synthetic_text(model: Any) -> str:
    """``tiny`` is a test shape; the other presets copy a real family's tensor shapes."""
    if model.get("preset") == "tiny":
        return f"{model.get('label')} (the tiny test shape: copies no real model, timings say nothing about one)"
    return f"{model.get('label')} (the tensor shapes of {model.get('family') or model.get('preset') or 'a real family'}: " \
           "timing and memory follow the shape, outputs are meaningless)"


BUNDLE_FILES = re.compile(r"evidence\.md|[^/]+\.png|[^/]+-report\.html|rerun-[^/]+\.sh")  # what a bundle holds


def _check_out_dir(out_dir: Path) -> None:
    """The bundle replaces ``out_dir`` whole, so it must be new, empty, or an earlier bundle."""
    if not out_dir.exists() and not out_dir.is_symlink():
        return
    if not out_dir.is_dir() or out_dir.is_symlink():
        raise BadInput(f"{out_dir} is not a directory", where="--out",
                       hint="give a new directory for the bundle (lbench writes evidence.md and PNGs there)")
    foreign = sorted(p.name for p in out_dir.iterdir() if not BUNDLE_FILES.fullmatch(p.name) or not p.is_file())
    if foreign:
        raise BadInput(f"{out_dir} holds files that are not an evidence bundle: {', '.join(foreign[:5])}"
                       + (" ..." if len(foreign) > 5 else ""), where="--out",
                       hint="the bundle replaces the whole directory: give a new or empty one")


LBENCH_PROGRAMS = ("lbench", "__main__.py", "harness")  # sys.argv[0] of the console script / python -m harness


MAX_COMMAND = 8192  # characters of a recorded command shown whole


def capped(value: object) -> object:
    """A JSON value with every string cut to ``printable``'s limit, with its marker (a manifest from
    elsewhere can hold a 60 MB string; the bundle shows it once, cut)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, Mapping):
        return {str(k)[:200]: capped(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [capped(v) for v in value]
    return value


def command_text(raw: object) -> str:
    """The run's recorded command (``RunRecord.command``), re-quoted word by word (harness/shell.py):
    a manifest from elsewhere cannot put a second command, a substitution or a fence end into the bundle.
    A command longer than ``MAX_COMMAND`` characters is shown cut, as a comment (it cannot be run whole)."""
    if isinstance(raw, str) and len(raw) > MAX_COMMAND:
        return shell.comment(f"recorded command, cut (not runnable as shown): {printable(raw)}")
    cmd = shell.normalized_command(raw)
    if cmd is None:
        return "# (the recorded command is not a shell command line; not shown)"
    if Path(shlex.split(cmd)[0]).name not in LBENCH_PROGRAMS:
        return shell.comment(f"recorded command (not an lbench command line): {raw}")
    return cmd


def write_evidence(runs: list[Run], out_dir: Path, *, redact: bool = True) -> Path:
    """Write ``evidence.md`` and its PNGs into a temporary directory beside ``out_dir``, then
    swap it in whole: an interrupted run leaves the previous bundle as it was."""
    out_dir = Path(out_dir)
    _check_out_dir(out_dir)
    with atomic_dir(out_dir) as tmp:
        _write_bundle(runs, tmp, redact=redact)
    return out_dir / "evidence.md"


def _write_bundle(runs: list[Run], out_dir: Path, *, redact: bool) -> Path:
    hosts = [r.record.host.hostname for r in runs]
    red = Redactor(redact, [h for h in hosts if h], runs=runs)
    parts: list[str] = []
    for run in runs:
        kind = find_kind(run.record.kind)  # each kind's part of the bundle: its section(run, analysis, out_dir)
        section, files = ("", []) if kind is None else _section(run, kind.section, out_dir)
        synthetic = list(run.record.synthetic_models)
        parts += [_summary_line(run), ""]
        if synthetic:
            parts += ["> **Synthetic model(s)**, random weights: " + "; ".join(md(_synthetic_text(m)) for m in synthetic), ""]

        virtual = virtual_status([run.record.host.facts])
        said = {True: "yes", False: "no"}.get(virtual["virtual"], "not known")
        parts += [f"> **Virtual machine: {said}**" + (f": {md(virtual['note'])}" if virtual["note"] else ""), ""]
        not_applicable = [f"{c.model} / {c.setting}: {n}" for c in run.record.cells for n in c.notes]
        if not_applicable:
            parts += ["> **Not applicable on this host** (measured anyway, as run):"] + \
                     [f"> - {md(n)}" for n in dict.fromkeys(not_applicable)] + [""]
        residency = [f"{c.model} / {c.setting}: {c.facts['startup_metal']['residency'].get('reason')}"
                     for c in run.record.cells if isinstance(c.facts.get("startup_metal"), dict)
                     and isinstance(c.facts["startup_metal"].get("residency"), dict)]
        if residency:  # decided from macOS, the SDK and architecture of the library running Metal (probes/residency.py)
            parts += ["> **Metal residency sets** (decided from the machine, not the log):"] + \
                     [f"> - {md(r)}" for r in dict.fromkeys(residency)] + [""]
        unfit = [c.facts["fit"]["warning"] for c in run.record.cells
                 if isinstance(c.facts.get("fit"), dict) and c.facts["fit"].get("warning")]
        if unfit:
            parts += ["> **Not wholly on the GPU**:"] + [f"> - {md(w)}" for w in dict.fromkeys(unfit)] + [""]
        quality = run.record.quality.warnings
        if quality:
            parts += ["> **Run quality** (read the figures with these in mind):"] + [f"> - {md(w)}" for w in quality] + [""]
        parts += [*shell.fence(command_text(run.record.command), "sh"), "", section, ""]
        if files:  # a pasted relative image link shows nothing on GitHub: the files must be dropped in
            parts += ["Plots (GitHub does not upload images a pasted link points at: drag each file into the "
                      "comment box, where GitHub uploads it and inserts its own link): "
                      + ", ".join(f"`{f}`" for f in files), ""]
        env = {"host": run.record.host.facts, "engine": run.record.engine.facts,
               "models": [{k: m.get(k) for k in ("label", "name", "path", "bytes", "quant", "sha256", "synthetic",
                                                 "preset")}
                          for m in run.record.models] or _claim_models(run),
               "lbench": run.record.lbench_version, "schema_version": run.record.schema_version}
        parts += ["<details><summary>Environment</summary>", "",
                  *shell.fence(json.dumps(capped(env), indent=2, default=str), "json"), "", "</details>", ""]
    text = red("\n".join(parts))
    for script in out_dir.glob("rerun-*.sh"):  # the scripts carry paths too
        script.write_text(red(script.read_text()))

    html_red = Redactor(redact, [h for h in hosts if h], runs=runs, xml=True)
    for run in runs:  # people attach the HTML report too: a redacted copy beside the Markdown
        try:
            render_report(run, out_dir / f"{file_stem(run.run_id)}-report.html", post=html_red)
        except Exception as exc:  # noqa: BLE001 - the Markdown is the bundle; say why the copy is missing
            text += f"\n\n(no report copy for {run.run_id}: {type(exc).__name__})"
    path = out_dir / "evidence.md"
    return atomic_write_text(path, text)


def _claim_models(run: Run) -> list[dict]:
    """A repro run's models, from its verdicts (its manifest has no model list of its own)."""
    try:
        v = run.table("verdicts")
    except Exception:  # noqa: BLE001 - no verdicts table: no models to name
        return []
    found: dict[str, Any] = {}
    for r in schema.records(v) if not v.empty else []:
        for m in json.loads(r.get("models") or "[]") if isinstance(r.get("models"), str) else []:
            found.setdefault(m.get("sha256") or m.get("label"), m)
    return list(found.values())
