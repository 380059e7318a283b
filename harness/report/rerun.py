"""Shell scripts that rerun an idle or swap run without lbench: llama-server, curl and awk.

Each script states the exact llama-server command line lbench ran (binary, model and port
made variables), the environment lbench set (e.g. ``GGML_METAL_NO_RESIDENCY=1``), the HTTP
request as curl sends it, and the schedule (pauses in the order they ran, or the models in
the order they were asked for); it then prints its own figure and a verdict against what
lbench found, and exits 0 when they agree.  Every value from the run is written through
harness/shell.py (a quoted word in code, an inert line in a comment; ``shell.script`` checks every
line), so a model name or path cannot break out of its word; variables a maintainer sets
(``LLAMA_SERVER``, ``MODEL``, ``PORT``) are the only unquoted expansions, always inside
double quotes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from harness.analysis.stats import measured

if TYPE_CHECKING:
    from harness.record import Cell, RunRecord

import json
import re

import pandas as pd

from harness import shell
from harness.engines.devices import is_selection_var
from harness.units import ms

STEP_RATIO = 1.10  # the wake model's MIN_STEP: a rise under 10% is not a step
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUANT_FLAG = {"Q8_0": "q8", "Q4_0": "q4", "F16": "f16"}


def model_recipe(model: Any) -> list[str]:
    """Comment lines saying how a maintainer gets the model: the lbench generator command for a
    synthetic one (same seed, same bytes), else the real model's name, quantisation, size and hash."""
    sha = model.get("sha256") or "?"
    if model.get("synthetic"):
        seed = re.search(r"-seed(\d+)\.gguf$", str(model.get("path") or ""))
        quant = _QUANT_FLAG.get(str(model.get("quant")), str(model.get("quant") or "q8").lower())
        cmd = shell.join(["lbench", "model", "synth", str(model.get("preset") or "tiny"), "--quant", quant,
                          "--seed", seed.group(1) if seed else "0", "--out", f"{model.get('label')}.gguf"])
        return [shell.comment(f"{model.get('label')}: a SYNTHETIC model (random weights); make the same bytes with"),
                shell.comment(f"  {cmd}"), shell.comment(f"sha256 {sha}")]
    name = model.get("name") or model.get("label")
    return [shell.comment(f"{model.get('label')}: {name}, {model.get('quant')}, {model.get('n_params')} parameters, "
                          f"{model.get('bytes')} bytes"),
            shell.comment(f"file name when measured: {str(model.get('path') or '?').rsplit('/', 1)[-1]}"),
            shell.comment(f"sha256 {sha} (get the file with this hash: the same name with another quantisation is "
                          "another model)")]


def _hash_check(var: str, sha: str | None) -> list[str]:
    if not sha:
        return []
    name = shell.env_name(var)
    return [f'got=$( (shasum -a 256 "${name}" 2>/dev/null || sha256sum "${name}") | cut -d" " -f1)',
            shell.line('[ "$got" = {} ] || echo "note: $' + name + ' is not the file measured (sha256 $got)" >&2',
                       sha)]


def _server_words(argv: list[str], engine_path: str | None, model_flags: dict[str, str]) -> str:
    """The server command with the binary, model paths and port replaced by variables."""
    words, replace_next = [], None
    for word in argv:
        if replace_next is not None:
            words.append(replace_next)
            replace_next = None
            continue
        if word == engine_path or (engine_path and word.rsplit("/", 1)[-1] == engine_path.rsplit("/", 1)[-1]):
            words.append('"$LLAMA_SERVER"')
        elif word in ("-m", "--model") and "-m" in model_flags:
            words.append(shell.quote(word))
            replace_next = model_flags["-m"]
        elif word == "--port":
            words.append(word)
            replace_next = '"$PORT"'
        elif word == "--models-preset":
            words.append(word)
            replace_next = "preset.ini"
        else:
            words.append(shell.quote(word))
    return " ".join(words)


UNSAFE_NOTE = "passed knowingly past lbench's server allow-list"


def _texts(value: object) -> list[str]:
    """A manifest list of strings (untrusted: anything else is empty)."""
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _unsafe_env(config: Any) -> dict[str, str]:
    """The run's ``--unsafe-server-env`` variables (NAME -> value) as its manifest recorded them."""
    pairs = (item.partition("=") for item in _texts(config.get("unsafe_server_env")))
    return {name: value for name, sep, value in pairs if sep and _ENV_NAME.match(name)}


def _unsafe_lines(config: Any) -> list[str]:
    """Comment lines saying what the run passed knowingly past lbench's allow-list (``--unsafe-server-arg``
    in the server's command below, ``--unsafe-server-env`` among the exports), so a reader of the script
    sees it for what it is before running it."""
    args, env = _texts(config.get("unsafe_server_args")), _unsafe_env(config)
    lines = []
    if args:
        lines.append(shell.comment(f"WARNING: {UNSAFE_NOTE} (--unsafe-server-arg), in the server's command below: "
                                   + shell.join(args)))
    if env:
        lines.append(shell.comment(f"WARNING: {UNSAFE_NOTE} (--unsafe-server-env), set for the server only, in "
                                   "its command below: " + ", ".join(env)))
    return lines


def _server_env(config: Any) -> str:
    """``env NAME=VALUE ... `` before the server's command: the ``--unsafe-server-env`` variables reach the
    server as they did in the run, and not curl or awk (a preloaded library would load into them too)."""
    words = [shell.quote(f"{k}={v}") for k, v in _unsafe_env(config).items()]
    return "env " + " ".join(words) + " " if words else ""


def _exports(env: dict, leave_out: Any = ()) -> list[str]:
    return [shell.export(str(k), v) for k, v in (env or {}).items() if _ENV_NAME.match(str(k)) and k not in leave_out]


def _header(run_id: str, what: str, engine: dict) -> list[str]:
    return ["#!/bin/sh", shell.comment(f"Rerun of lbench run {run_id} ({what}) without lbench: llama-server, curl, awk."),
            shell.comment(f"Measured with llama-server build {engine.get('build_number')} ({engine.get('commit')}); "
                          "LLAMA_SERVER=/path/to/llama-server sh this-script.sh"),
            "set -eu",
            'LLAMA_SERVER=${LLAMA_SERVER:-llama-server}',
            'PORT=${PORT:-18080}',
            'URL="http://127.0.0.1:$PORT"'] + device_lines(engine)


def device_lines(engine: dict) -> list[str]:
    """The device the run drove: its backend (the build the rerun needs) and the backend's device
    selection variable as lbench set it (``GGML_VK_VISIBLE_DEVICES=0``: without it ggml skips a
    CPU-type Vulkan device such as lavapipe, or picks another GPU).  Only the backends' own selection
    variables are exported, whatever the manifest holds (a run directory is untrusted)."""
    backend = engine.get("backend")
    if not backend:
        return []
    used = [str(d) for d in engine.get("device_used") or []]
    described = {str(d.get("name")): str(d.get("description")) for d in engine.get("backend_devices") or []
                 if isinstance(d, dict)}
    lines = [shell.comment(f"the device: backend {backend}, "
                           + (", ".join(f"{u} ({described[u]})" if u in described else u for u in used)
                              or "no device (CPU)")
                           + f"; LLAMA_SERVER must be a {backend} build (lbench engine install --backend {backend})")]
    select = engine.get("device_select")
    for name, value in (select.items() if isinstance(select, dict) else []):
        if is_selection_var(name) and value is not None:
            lines.append(f"{shell.export(name, value)}  # the device lbench selected")
    return lines


_START = ['> server.log 2>&1 &', 'SERVER=$!',
          "trap 'kill \"$SERVER\" 2>/dev/null || true' EXIT INT TERM",
          'tries=0',
          'until curl -sf "$URL/health" > /dev/null; do',
          '  tries=$((tries + 1)); [ "$tries" -lt 600 ] || { echo "server not ready; see server.log" >&2; exit 2; }',
          '  kill -0 "$SERVER" 2>/dev/null || { echo "server exited; see server.log" >&2; exit 2; }',
          '  sleep 0.1', 'done']

_MEDIAN = ["median() {  # the median of the numbers on stdin",
           "  sort -n | awk '{v[NR] = $1} END {if (NR == 0) print \"nan\"; "
           "else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'",
           "}"]


def idle_script(run_id: str, record: RunRecord, cell: Cell, samples: pd.DataFrame, wake: dict | None,
                headline: str | None) -> str:
    """The rerun of one idle cell: the server as lbench started it, the warm-up, the pauses in the
    order they ran, and the check of the wake model's answer (step or none) on curl's timings."""
    engine = dict(record.engine.facts)
    model: Any = next((m for m in record.models if m.label == cell.get("model")), {})

    good = measured(samples)
    rows = good[(good["model"] == cell.get("model")) & (good["setting"] == cell.get("setting"))]
    rows = rows.sort_values("seq") if "seq" in rows else rows
    pauses = [shell.number(float(p)) for p in rows["pause_requested_s"]]
    body = cell.get("request_body") or json.dumps({"prompt": "Hello", "n_predict": 1, "cache_prompt": True})
    warmup = record.config_int("warmup")
    lines = _header(run_id, f"idle cell {cell.get('model')} / {cell.get('setting')}", engine)
    lines += model_recipe(model)
    lines += [shell.line("MODEL=${{MODEL:-{}}}", f'{model.get("label") or "model"}.gguf')]
    lines += _hash_check("MODEL", model.get("sha256"))
    lines += _unsafe_lines(record.config)
    lines += ["# the environment lbench set for this cell"] + (_exports(cell.get("env_overrides"),
                                                                        _unsafe_env(record.config)) or ["# (none)"])
    lines += ["# the server, as lbench started it"]
    lines += [_server_env(record.config) + _server_words(cell.get("argv") or [], engine.get("path"), {"-m": '"$MODEL"'})
              + " " + _START[0]] + _START[1:]
    lines += ["# the request lbench timed (one token, prompt cached); curl opens a new loopback connection per",
              "# request where lbench keeps one open, so expect its times a little (~0.1-1 ms) higher",
              shell.line("printf '%s' {} > request.json", body),
              "ask() {",
              "  curl -s -o /dev/null -w '%{time_total}\\n' -H 'Content-Type: application/json' "
              '--data-binary @request.json "$URL/completion"',
              "}", f"i=0; while [ \"$i\" -lt {shell.number(warmup)} ]; do ask > /dev/null; i=$((i + 1)); done"
                   "  # unmeasured warm-up",
              "# the pauses in the order lbench ran them (seconds of silence, then one request)",
              "set -- " + " ".join(pauses),
              ": > times.txt",
              'for pause in "$@"; do sleep "$pause"; echo "$pause $(ask)" >> times.txt; done']
    lines += _MEDIAN
    lines += [shell.comment(f"lbench found: {headline or '(no headline)'}")]
    if wake and wake.get("has_step"):
        upper = wake.get("second_last_s") if wake.get("second_first_s") is not None else None
        woken_sel = (f"$1 >= {shell.number(wake['first_woken_s'])}"
                     + (f" && $1 <= {shell.number(upper)}" if upper is not None else ""))
        lines += [f"warm=$(awk '$1 <= {shell.number(wake['last_warm_s'])} {{print $2 * 1000}}' times.txt | median)",
                  f"woken=$(awk '{woken_sel} {{print $2 * 1000}}' times.txt | median)",
                  f'echo "warm (pauses <= {shell.number(wake["last_warm_s"])} s): $warm ms; woken (pauses >= '
                  f'{shell.number(wake["first_woken_s"])} s): $woken ms (lbench: {ms(wake["warm_median_ms"])} and '
                  f'{ms(wake["woken_median_ms"])} ms)"',
                  f"if awk -v a=\"$warm\" -v b=\"$woken\" 'BEGIN {{exit !(b >= a * {STEP_RATIO})}}'; then",
                  '  echo "verdict: the wake step is reproduced (woken/warm >= 1.10)"; exit 0',
                  "else", '  echo "verdict: NOT reproduced: no rise of 10% where lbench found the step"; exit 1', "fi"]
    else:
        if not pauses:
            return shell.script(lines + ['echo "no measured pauses in this cell"; exit 2'])
        first, last = min(float(p) for p in pauses), max(float(p) for p in pauses)
        med = rows.groupby("pause_requested_s")["latency_ms"].median()
        ref_short, ref_long = float(med.loc[first]), float(med.loc[last])
        lbench_step = ref_long >= ref_short * STEP_RATIO
        lines += [f"short=$(awk '$1 == {shell.number(first)} {{print $2 * 1000}}' times.txt | median)",
                  f"long=$(awk '$1 == {shell.number(last)} {{print $2 * 1000}}' times.txt | median)",
                  f'echo "after {shell.number(first)} s: $short ms; after {shell.number(last)} s: $long ms '
                  f'(lbench: {ms(ref_short)} and '
                  f'{ms(ref_long)} ms, {"a rise of 10% or more" if lbench_step else "within 10%"})"',
                  f"if awk -v a=\"$short\" -v b=\"$long\" 'BEGIN {{exit !((b >= a * {STEP_RATIO}) == "
                  f"{int(lbench_step)})}}'; then",
                  '  echo "verdict: agrees with lbench (the longest pause against the shortest, either side of +10%)"; '
                  'exit 0',
                  "else", '  echo "verdict: does NOT agree with lbench"; exit 1', "fi"]
    return shell.script(lines)


def swap_script(run_id: str, record: RunRecord, requests: pd.DataFrame, findings: list[str]) -> str:
    """The rerun of a swap storm: the router with lbench's preset, the models asked for in the
    order lbench sent them (one at a time), and the check that the router never kept more
    children than ``models_max`` while doing so."""
    engine = dict(record.engine.facts)
    router = record.section("router")
    config = record.config
    models = list(record.models)
    lines = _header(run_id, f"swap storm, {config.get('pattern')}, models_max={config.get('models_max')}", engine)
    paths = {}
    for i, m in enumerate(models, start=1):
        lines += model_recipe(m)
        lines += [shell.line(f"MODEL_{i}=${{{{MODEL_{i}:-{{}}}}}}", f'{m.get("label") or f"model{i}"}.gguf')]
        lines += _hash_check(f"MODEL_{i}", m.get("sha256"))
        paths[str(m.get("path"))] = f"MODEL_{i}"
    lines += ["# the router's models preset, as lbench wrote it (model paths made variables)", ": > preset.ini"]
    for line in str(router.get("preset") or "").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "model" and value.strip() in paths:
            lines.append(f"printf 'model = %s\\n' \"${paths[value.strip()]}\" >> preset.ini")
        else:
            lines.append(shell.line("printf '%s\\n' {} >> preset.ini", line))
    lines += _unsafe_lines(config)
    lines += ["# the environment lbench set: an empty model cache, so nothing is downloaded",
              "mkdir -p llama-cache", 'export LLAMA_CACHE="$PWD/llama-cache"']
    storm_env = (item.partition("=") for item in _texts(config.get("env")))  # the storm's env axis value
    lines += [f"unset {shell.env_name(name)}" if value.strip().lower() == "unset" else shell.export(name, value)
              for name, sep, value in storm_env if sep and _ENV_NAME.match(name)]
    lines += ["# the router, as lbench started it"]
    lines += [_server_env(config) + _server_words(router.get("argv") or [], engine.get("path"), {}) + " " + _START[0]] \
        + _START[1:]
    order = [str(m) for m in (requests.sort_values("index")["model"] if "index" in requests else requests["model"])]
    n_predict = int(config.get("n_predict") or 1)
    names = list(dict.fromkeys(order))
    lines += ["# the request body per model, as lbench sent it (streamed, one token)"]
    for i, name in enumerate(names, start=1):
        body = {"model": name, "prompt": "Hello", "n_predict": n_predict, "cache_prompt": True, "stream": True}
        lines.append(shell.line(f"BODY_{i}={{}}  ", json.dumps(body)) + shell.comment(name))
    lines += ["ask() {  # one completion with body number $1",
              '  eval "body=\\$BODY_$1"',
              "  curl -s -o /dev/null -w '%{http_code} %{time_total}\\n' -H 'Content-Type: application/json' "
              '-d "$body" "$URL/completion"',
              "}",
              shell.comment(f"the models in the order lbench asked for them, by body number "
                            f"({config.get('concurrency') or 1} at a time there; one at a time here)"),
              f"set -- {' '.join(str(names.index(m) + 1) for m in order)}",
              ": > times.txt", "peak=0",
              'for i in "$@"; do',
              '  echo "$i $(ask "$i")" >> times.txt',
              "  loaded=$(curl -s \"$URL/models\" | grep -o '\"value\": *\"loaded\"' | wc -l | tr -d ' ')",
              '  if [ "$loaded" -gt "$peak" ]; then peak=$loaded; fi',
              "done"]
    lines += _MEDIAN
    limit = config.get("models_max")
    lines += [shell.comment(f"lbench found: {f}") for f in findings[:3]]
    lines += ["ok=$(awk '$2 == 200' times.txt | wc -l | tr -d ' ')",
              "p50=$(awk '$2 == 200 {print $3 * 1000}' times.txt | median)",
              f'echo "answered $ok of $# requests, p50 $p50 ms; most models loaded at once: $peak (models_max={limit})"']
    lines += ['if [ "$peak" -eq 0 ]; then echo "verdict: cannot tell (GET /models never listed a loaded model)"; '
              'exit 2; fi']
    if limit:
        lines += [f'if [ "$peak" -le {shell.number(int(limit))} ]; then echo "verdict: the cap held"; exit 0; '
                  'else echo "verdict: the cap did NOT hold"; exit 1; fi']
    return shell.script(lines)
