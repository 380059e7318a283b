"""``recipe.sh``: a claim's experiment as a standalone shell script that checks its own result.

The script names every model the way idle and swap rerun scripts do
(``harness.report.rerun.model_recipe``: the generator command of a synthetic model, else the
real model's name, quantisation and sha256, with a hash check before use), writes the router's
preset with the model paths made variables, starts the router with lbench's argv and
environment, samples the router's children, replays the steps the lab recorded (requests,
freezes, sleeps, waits for router log lines), then computes the figures the scenario said how
to compute in shell (``Lab.figure``), evaluates the claim's own ``[[check]]`` requirements on
them (the same statements ``harness.repro.claims.evaluate`` judges in Python), prints each
figure and one verdict line, and exits 0 when its verdict is the one lbench found for that
repetition (1 when not, 3 when some check needs figures the script cannot measure; it says
which, on its last lines).

Every value in the script is a shell word quoted by ``shlex`` (harness/shell.py); figure names,
claim text and model names are printed from quoted words, never expanded; comments are one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness import shell
from harness.engines.router import HOLD_KEY
from harness.repro.figures import PEAK_CHILDREN
from harness.models.gguf_info import file_sha256, read_model_info
from harness.report.rerun import _hash_check, model_recipe

if TYPE_CHECKING:
    from harness.repro.lab import Lab


class Requirement(Protocol):
    """What a recipe reads of one ``[[check]]`` (harness.repro.claims.Requirement)."""

    @property
    def figure(self) -> str: ...
    @property
    def op(self) -> str: ...
    @property
    def value(self) -> object: ...
    @property
    def ref(self) -> str | None: ...
    @property
    def says(self) -> str | None: ...
    @property
    def undecided(self) -> bool: ...


class ClaimSpec(Protocol):
    """What a recipe reads of a claim spec (harness.repro.claims.ClaimSpec); a protocol, so the
    recipe writers below the claims never import them."""

    @property
    def id(self) -> str: ...
    @property
    def claim(self) -> str: ...
    @property
    def check(self) -> Sequence[Requirement]: ...

# lbench's verdict -> the words the script prints for its own
SCRIPT_WORDS = {"holds": "holds", "contradicted": "does not hold", "inconclusive": "inconclusive"}
EXIT_REPRODUCED, EXIT_DIFFERENT, EXIT_NOT_CHECKED = 0, 1, 3

_FUNCTIONS = [
    "now() { perl -MTime::HiRes=time -e 'printf \"%.3f\\n\", time' 2>/dev/null || date +%s; }",
    'log_count() { grep -cE -- "$1" "$WORK/router.stderr.log" 2>/dev/null || true; }',
    "wait_log() {  # until the router log holds more than $2 lines matching ERE $1, at most $3 s",
    '  end=$(awk -v a="$(now)" -v b="$3" \'BEGIN {printf \"%.3f\\n\", a + b}\')',
    '  while [ "$(log_count "$1")" -le "$2" ]; do',
    '    awk -v a="$(now)" -v b="$end" \'BEGIN {exit !(a >= b)}\' && { echo "(waited $3 s for: $1; going on)"; return 1; }',
    "    sleep 0.02",
    "  done",
    "}",
    "find_child() {  # PID of the router's child whose command line matches ERE $1 (10 s, as lbench waits)",
    "  local end=$((SECONDS + 10)); while [ \"$SECONDS\" -lt \"$end\" ]; do "
    "p=$(pgrep -P \"$ROUTER_PID\" -f -- \"$1\" | head -n 1); "
    "[ -n \"$p\" ] && { echo \"$p\"; return 0; }; sleep 0.02; done; return 1",
    "}",
    "sse_count() { M=\"$1\" S=\"$2\" awk -F '\\t' '$2 == ENVIRON[\"M\"] && $3 == ENVIRON[\"S\"]' \"$WORK/sse.txt\" "
    "2>/dev/null | wc -l | tr -d ' '; }",
    "wait_sse() {  # until /models/sse has sent more than $3 events of model $1 with status $2, at most $4 s",
    '  end=$(awk -v a="$(now)" -v b="$4" \'BEGIN {printf \"%.3f\\n\", a + b}\')',
    '  while [ "$(sse_count "$1" "$2")" -le "$3" ]; do',
    '    awk -v a="$(now)" -v b="$end" \'BEGIN {exit !(a >= b)}\' && { echo "(waited $4 s for $1 $2 on /models/sse; '
    'going on)"; return 1; }',
    "    sleep 0.02",
    "  done",
    "}",
    "models_loaded() {  # how many of the models named ($@) $WORK/models.json (GET /models) lists as loaded",
    "  perl -MJSON::PP -e 'my %want = map { $_ => 1 } @ARGV[1 .. $#ARGV]; my $n = 0; "
    "my $d = eval { local $/; open my $f, q{<}, $ARGV[0] or die; decode_json(<$f>) } || {}; "
    "for (@{$d->{data} || []}) { $n++ if $want{$_->{id} // q{}} && (($_->{status} || {})->{value} // q{}) eq q{loaded} } "
    "print qq{$n\\n}' \"$WORK/models.json\" \"$@\"",
    "}",
]

# /models/sse, every event stamped with the script's clock: "time<TAB>model<TAB>status" (perl's core JSON::PP)
_SSE = ("( curl -sN \"http://127.0.0.1:$PORT/models/sse\" | perl -MJSON::PP -MTime::HiRes=time -ne 'BEGIN { $| = 1 } "
        "next unless s/^data:\\s*//; my $d = eval { decode_json($_) } or next; my $m = $d->{model} // q{}; "
        "my $s = ($d->{data} || {})->{status} // q{}; s/[\\t\\n]/ /g for $m, $s; "
        "printf qq{%.3f\\t%s\\t%s\\n}, time, $m, $s' ) > \"$WORK/sse.txt\" 2>/dev/null &")

# the router's tree every 20 ms by ps (zombies left out, as lbench's sampler does): children alive, RSS of the
# router and its children (KiB), the router's RSS, the largest child's
_SAMPLER = ("( while kill -0 \"$ROUTER_PID\" 2>/dev/null; do ps -A -o pid=,ppid=,stat=,rss= | awk -v r=\"$ROUTER_PID\" "
            "'$1 == r {root = $4} $2 == r && $3 !~ /^Z/ {n++; t += $4; if ($4 > m) m = $4} "
            "END {print n + 0, root + t, root + 0, m + 0}'; sleep 0.02; done ) > \"$WORK/children.txt\" 2>/dev/null &")

_CHECK = [
    "met=0; failed=0; soft=0; missing=0",
    "check() {  # what, observed value, op, expected value, 1 when failing means undecided",
    '  if [ -z "$2" ]; then echo "  $1: not observed"; missing=$((missing + 1)); return 0; fi',
    '  if awk -v a="$2" -v op="$3" -v b="$4" \'BEGIN { if (op == "==") r = (a == b); else if (op == "!=") '
    'r = (a != b); else if (op == "<=") r = (a <= b); else if (op == "<") r = (a < b); else if (op == ">=") '
    "r = (a >= b); else r = (a > b); exit !r }'; then",
    '    echo "  $1 was $2, expected $3 $4: met"; met=$((met + 1))',
    "  else",
    '    echo "  $1 was $2, expected $3 $4: NOT met"',
    '    if [ "$5" = 1 ]; then soft=$((soft + 1)); else failed=$((failed + 1)); fi',
    "  fi",
    "}",
]


def shell_value(value: object) -> str:
    """A figure's value as the recipe prints it: ``true``/``false``, a number, a word."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def _models(models: list) -> tuple[list[str], dict[str, str]]:
    """Lines naming each model (model_recipe + hash check) and its variable, by model path."""
    lines: list[str] = []
    by_path: dict[str, str] = {}
    for m in models:
        path = str(m.path)
        if path in by_path:
            continue
        try:
            info = read_model_info(m.path).as_dict()
            sha = file_sha256(m.path)
        except Exception as exc:  # a model file gone since the run: say so, do not guess
            info, sha = {"name": "?", "quant": "?", "bytes": "?", "n_params": "?"}, None
            lines.append(shell.comment(f"{m.name}: model file unreadable now ({exc})"))
        described = {**info, "label": m.name, "path": path, "sha256": sha}
        lines += [shell.comment(line[2:] if line.startswith("# ") else line) for line in model_recipe(described)]
        var = f"MODEL_{len(by_path) + 1}"
        lines.append(f"{var}=${{{var}:-{shell.quote(m.name + '.gguf')}}}")
        lines.append(f'[ -f "${var}" ] || {{ echo "model file missing: ${var} (make it as the comment above says, '
                     f'or set {var}=/path/to/it)" >&2; exit 2; }}')
        lines += _hash_check(var, sha)
        by_path[path] = var
    return lines, by_path


def _preset_lines(preset: str, by_path: dict[str, str], run_dir: Path | None = None) -> list[str]:
    """The preset INI written line by line, model paths replaced by their variables and the FIFOs of
    held children (``Lab.held``, in ``run_dir``) by theirs in ``$WORK``, made first."""
    out = [': > "$WORK/preset.ini"']
    for line in preset.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "model" and value.strip() in by_path:
            out.append(f"printf 'model = %s\\n' \"${by_path[value.strip()]}\" >> \"$WORK/preset.ini\"")
        elif key.strip() == HOLD_KEY and run_dir is not None and Path(value.strip()).parent == run_dir:
            fifo = f'"$WORK"/{shell.quote(Path(value.strip()).name)}'
            out += [f"rm -f {fifo}; mkfifo {fifo}  # the held child waits here until the script writes it",
                    f"printf '%s = %s\\n' {shell.quote(HOLD_KEY)} {fifo} >> \"$WORK/preset.ini\""]
        else:
            out.append(f"printf '%s\\n' {shell.quote(line)} >> \"$WORK/preset.ini\"")
    return out


def _var(figure: str, names: dict[str, str]) -> str:
    return names.setdefault(figure, f"FIG_{len(names) + 1}")


_STOP = ['kill ${SAMPLER_PID:+"$SAMPLER_PID"} ${SSE_PID:+"$SSE_PID"} 2>/dev/null; kill "$ROUTER_PID" 2>/dev/null; '
         'wait "$ROUTER_PID" 2>/dev/null',
         'echo "logs in $WORK"']


def figure_lines(lab: Lab, names: dict[str, str], extra: dict[str, tuple[str, str]] | None = None) -> list[str]:
    """The figures ``lab``'s scenario said how to compute in shell (and ``extra``), and its settings, printed."""
    lines = []
    for figure, (command, how) in {**(extra or {}), **dict(getattr(lab, "shell_figures", {}) or {})}.items():
        var = _var(figure, names)
        lines += [shell.comment(f"{figure}: {how}") if how else shell.comment(figure),
                  f"{var}=$({command})", f"echo \"  \"{shell.quote(figure)}\": ${var}\""]
    for figure, value in dict(getattr(lab, "given", {}) or {}).items():
        var = _var(figure, names)
        lines += [f"{var}={shell.quote(shell_value(value))}  # a setting of the experiment",
                  f"echo \"  \"{shell.quote(figure)}\": ${var} (set, not measured)\""]
    return lines


def verdict_lines(names: dict[str, str], unmeasured: dict[str, str], checks: Sequence[Requirement] | None,
                  lbench_verdict: str | None) -> list[str]:
    """The claim's checks on the figures named ``names`` (figure -> shell variable), then the verdict."""
    if checks is None:
        return ["echo 'verdict: not checked by this script: it was written without the claim'\"'\"'s "
                "checks (one of several routers of the scenario, or a run that stopped before its "
                "verdict); compare the figures above with the verdict by hand'",
                f"exit {EXIT_NOT_CHECKED}"]
    lines = ["# ---- the claim's checks (its [[check]] requirements, the statements lbench judged)", *_CHECK,
             'echo "checks:"']
    unchecked: list[str] = []
    for req in checks:
        what = f"{req.says} ({req.figure})" if req.says else req.figure
        if req.figure not in names:
            why = unmeasured.get(req.figure, "computed by lbench from its own probes; this script does not measure it")
            unchecked.append(f"{what}: {why}")
            continue
        if req.ref is not None:
            if req.ref not in names:
                unchecked.append(f"{what}: compared with {req.ref}, which this script does not measure")
                continue
            expected = f'"${names[req.ref]}"'
        else:
            expected = shell.quote(shell_value(req.value))
        lines.append(f"check {shell.quote(what)} \"${names[req.figure]}\" {shell.quote(req.op)} {expected} "
                     f"{1 if req.undecided else 0}")
    lines += ['if [ "$missing" -gt 0 ]; then mine="inconclusive"; elif [ "$failed" -gt 0 ]; then mine="does not hold"; '
              'elif [ "$soft" -gt 0 ]; then mine="inconclusive"; else mine="holds"; fi']
    found = SCRIPT_WORDS.get(str(lbench_verdict), str(lbench_verdict))
    lines.append(f"lbench={shell.quote(found)}")
    evaluated = len(checks) - len(unchecked)
    if unchecked:
        lines += [f"echo {shell.quote(f'not checked by this script ({len(unchecked)} of {len(checks)} checks):')}"]
        lines += [f"echo {shell.quote('  ' + shell.inert(u))}" for u in unchecked]
        if evaluated == 0:
            lines += [f"echo \"verdict: not checked by this script: it can evaluate none of the claim's {len(checks)} "
                      "check(s); lbench found: $lbench\"", f"exit {EXIT_NOT_CHECKED}"]
            return lines
        lines += [f"echo \"verdict: not reproduced by this script alone: on the {evaluated} check(s) it evaluates "
                  f"the claim $mine; lbench found: $lbench over all {len(checks)}\"", f"exit {EXIT_NOT_CHECKED}"]
        return lines
    lines += ['if [ "$mine" = "$lbench" ]; then',
              '  echo "verdict: the claim $mine (lbench found: $lbench): reproduced"; exit 0',
              "else",
              '  echo "verdict: the claim $mine (lbench found: $lbench): NOT reproduced"; exit 1',
              "fi"]
    return lines


def _header(spec: ClaimSpec | None, lab: Lab) -> list[str]:
    b = lab.binary
    lines = ["#!/usr/bin/env bash",
             "# Rerun of this claim's experiment without lbench: the models, the router command, its environment,",
             "# the preset INI, the harness's steps in order (times are seconds after the lab start), then the",
             "# claim's checks on what this script observed and a verdict (exit 0: lbench's verdict reproduced).",
             "# Run: LLAMA_SERVER=/path/to/llama-server MODEL_1=/path/to/model.gguf ... bash recipe.sh"]
    if spec is not None:
        lines += [shell.comment(f"claim {spec.id}: {spec.claim}")]
    return lines + [shell.comment(f"engine when measured: {b.path} (version {b.version}, build {b.build_number})"),
                    "set -u", f"LLAMA_SERVER=${{LLAMA_SERVER:-{shell.quote(str(b.path))}}}",
                    "PORT=${PORT:-18080}", "WORK=$(mktemp -d)", "mkdir -p \"$WORK/llama-cache\"",
                    "SAMPLER_PID=; SSE_PID=; ROUTER_PID="]




def _router_lines(lab: Lab, by_path: dict[str, str], names: dict[str, str], extra: dict | None = None) -> list[str]:
    """One router of the recipe: its preset and environment, its start, the steps, its figures, its stop."""
    router = lab.router
    b = lab.binary
    words = [shell.quote(a) for a in router.argv]
    words[router.argv.index("--port") + 1] = '"$PORT"'
    words[router.argv.index("--models-preset") + 1] = '"$WORK/preset.ini"'
    words[next((i for i, a in enumerate(router.argv) if a == str(b.path)), 0)] = '"$LLAMA_SERVER"'
    preset = router.preset_path.read_text() if router.preset_path.exists() else ""
    lines = _preset_lines(preset, by_path, lab.run_dir)
    for k, v in sorted(lab.environment_set().items()):
        lines.append(f'export {k}="$WORK/llama-cache"' if k == "LLAMA_CACHE" else shell.export(k, v))
    lines += [" ".join(words) + " 2> \"$WORK/router.stderr.log\" > \"$WORK/router.stdout.log\" &", "ROUTER_PID=$!",
              "STARTED=false; tries=0",
              'until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do',
              '  tries=$((tries + 1)); kill -0 "$ROUTER_PID" 2>/dev/null && [ "$tries" -lt 1200 ] || break',
              "  sleep 0.1", "done",
              'curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && STARTED=true']
    may_fail = bool(getattr(lab, "start_may_fail", False))
    if may_fail:
        lines += ['if [ "$STARTED" = true ]; then', "echo 'the router started'"]
    else:
        lines += ['[ "$STARTED" = true ] || { echo "the router did not come up; see $WORK/router.stderr.log" >&2; '
                  'kill "$ROUTER_PID" 2>/dev/null; exit 2; }']
    lines += ["# the router's children and memory, sampled every 20 ms by ps (peak_children: the most alive at once)",
              _SAMPLER, "SAMPLER_PID=$!",
              "# every status the router sends on /models/sse, with this script's time", _SSE, "SSE_PID=$!",
              "sleep 0.2  # the capture subscribed",
              "wait_jobs() { for j in $(jobs -p); do [ \"$j\" = \"$ROUTER_PID\" ] || [ \"$j\" = \"$SAMPLER_PID\" ] || "
              "[ \"$j\" = \"$SSE_PID\" ] || wait \"$j\"; done; }"]
    lines += lab.actions
    lines += ["wait_jobs", "sleep 0.2"]
    if may_fail:
        lines += ["else", "  echo 'the router did not start (its log: '\"$WORK/router.stderr.log\"')'",
                  '  wait "$ROUTER_PID" 2>/dev/null', "fi"]
    lines += ["# ---- what this script observed from this router (computed before it stops)",
              'echo "figures observed:"', *figure_lines(lab, names, extra), *_STOP]
    return lines


def write_lab_recipe(lab: Lab) -> None:
    """The lab's ``recipe.sh`` as its router stops (or fails to start), without the claim's checks;
    a recipe that cannot be written says why in one comment line, never hiding the scenario's own
    outcome."""
    try:
        write_recipe(lab)
    except Exception as exc:
        (lab.run_dir / "recipe.sh").write_text(shell.script([shell.comment(f"recipe could not be written: {exc}")]))


def write_recipe(lab: Lab, spec: ClaimSpec | None = None, lbench_verdict: str | None = None) -> None:
    """``recipe.sh`` in the lab's directory.  With ``spec`` and lbench's verdict for this
    repetition, the script evaluates the spec's checks and compares; without, it says so."""
    write_recipes([lab], lab.run_dir / "recipe.sh", spec, lbench_verdict)


def write_recipes(labs: list[Lab], path: Path, spec: ClaimSpec | None = None, lbench_verdict: str | None = None) -> None:
    """One ``recipe.sh`` at ``path`` that runs the routers of ``labs`` one after the other (each in
    its own folder of the work folder, on the same port), then judges the claim on the figures
    all of them observed."""
    models = [m for lab in labs for m in getattr(lab, "models", []) or []]
    model_lines, by_path = _models(models)
    lines = _header(spec, labs[0]) + model_lines + _FUNCTIONS
    names: dict[str, str] = {}
    unmeasured: dict[str, str] = {}
    if len(labs) == 1:
        lines += _router_lines(labs[0], by_path, names, {"peak_children": (PEAK_CHILDREN.shell(labs[0]),
                                                                      f"{PEAK_CHILDREN.how} (differs from lbench: "
                                                                      f"{PEAK_CHILDREN.differs})")})
    else:
        lines += ['TOP=$WORK']
        for i, lab in enumerate(labs, start=1):
            where = lab.run_dir.name
            lines += [shell.comment(f"---- router {i} of {len(labs)} ({where})"),
                      f"WORK=\"$TOP\"/{shell.quote(where)}", 'mkdir -p "$WORK/llama-cache"',
                      *_router_lines(lab, by_path, names)]
        lines += ['WORK=$TOP']
    for lab in labs:
        unmeasured.update(getattr(lab, "unmeasured", {}) or {})
        retry = getattr(lab, "retry", None)
        if retry:
            test, why, attempts = retry
            gave_up = f"verdict: not checked by this script: the situation was not created in {attempts} attempts"
            lines += [f"if {test}; then",
                      f"  echo {shell.quote('attempt ')}\"${{ATTEMPT:-1}}\"{shell.quote(': ' + shell.inert(why))}",
                      f'  if [ "${{ATTEMPT:-1}}" -lt {attempts} ]; then ATTEMPT=$((${{ATTEMPT:-1}} + 1)) exec bash "$0"; '
                      "fi", f"  echo {shell.quote(gave_up)}", f"  exit {EXIT_NOT_CHECKED}", "fi"]
    checks = list(spec.check) if spec is not None else None
    lines += verdict_lines(names, unmeasured, checks, lbench_verdict)
    path.write_text(shell.script(lines))
