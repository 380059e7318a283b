"""Experiment specs: what a run measures, independent of how it is driven.

A spec comes from a TOML file in ``experiments/`` (``--spec``), from CLI options,
or both (options given on the command line override the file).  Everything is
validated here, before a run directory exists, so bad input leaves nothing behind.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from harness.engines import registry, server_policy
from harness.engines.base import Setting
from harness import knob_axes, typed_toml
from harness.knob_axes import parse_keep_alive as parse_keep_alive  # re-exported: the axis lives there
from harness.errors import BadInput
from harness.workloads import sequence as sequence_mod
from harness.toml_input import read_toml
from harness.probes.devices.sampler import MIN_INTERVAL_S

# llama-idle covers 0-4 s in 0.8 s steps; the penalty appears between ~0.8 and ~1.6 s
# on Apple Silicon, so the default grid is dense there.
DEFAULT_PAUSES_S = [0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 2.0, 2.5, 3.0, 4.0]
DEFAULT_MODEL = "llama3.2-1b-q8"
CACHE_STATES = ("as-is", "warm", "cold")
FIRST_STATES = ("cold", "warm", "evicted", "slept")  # lbench swap --first-request (runs/swap_first.py)
MAX_PAUSE_S = 3600.0
MAX_TIMEOUT_S = 86400.0
MAX_PAUSES = 10_000  # one grid; a range is checked against it before it is expanded, a list after
# upper bounds, checked before any run directory exists (a value past them would exhaust memory
# or be refused by the server after the run started)
MAX_REPS = 10_000
MAX_WARMUP = 10_000
MAX_SELF_CHECK = 10_000
MAX_CELLS = 10_000  # models x settings x engines in one idle run (settings: the product of the axes)
MAX_IDLE_REQUESTS = 1_000_000  # cells x pauses x (reps + warm-up)
MAX_SEED = 2**32 - 1
MAX_CTX = 1 << 24  # as engines/server_flags.MAX_CTX
MAX_NAME = 100  # a run's name, shown in listings and reports
MAX_SWAP_REQUESTS = 1_000_000
MAX_CONCURRENCY = 1024
MAX_PARALLEL = 256
MAX_N_PREDICT = 1 << 20  # far beyond any context lbench starts; llama.cpp keeps it in an int32
MAX_MODELS_MAX = 1024
MAX_SLEEP_IDLE_S = 86_400  # a day; llama.cpp keeps it in an int32 of seconds
MAX_SWAP_MODELS = 1024
MAX_ZIPF_S = 100.0


def parse_pauses(text: str, where: str = "--pauses") -> list[float]:
    """``"0,0.5,1.2"`` or ranges ``"0:4:0.8"`` (start:stop:step, stop included), mixed."""
    out: list[float] = []
    for item in (t.strip() for t in str(text).split(",")):
        if not item:
            continue
        if ":" in item:
            parts = item.split(":")
            if len(parts) != 3:
                raise BadInput(f"bad pause range {item!r}", where=where, hint="write start:stop:step, e.g. 0:4:0.8")
            start, stop, step = (_number(p, where) for p in parts)
            if step <= 0:
                raise BadInput(f"pause range step must be > 0 in {item!r}", where=where)
            span = (stop - start) / step
            if not math.isfinite(span) or len(out) + span + 1 > MAX_PAUSES:  # checked before it is expanded
                raise BadInput(f"pause range {item!r} makes more than {MAX_PAUSES} pauses", where=where,
                               hint="use a larger step, e.g. 0:4:0.1")
            n = int(math.floor(span + 1e-9)) + 1
            out += [round(start + i * step, 6) for i in range(max(n, 0))]
        else:
            out.append(_number(item, where))
    return validate_pauses(out, where)


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise BadInput(f"pause {text!r} is not a number", where=where,
                       hint="give seconds, e.g. --pauses 0,0.5,1.2 or 0:4:0.8") from None
    if not math.isfinite(value):
        raise BadInput(f"pause {text!r} is not a finite number", where=where)
    return value


def validate_pauses(pauses: list[float], where: str = "pauses") -> list[float]:
    if not pauses:
        raise BadInput("no pauses given", where=where, hint="e.g. --pauses 0,0.5,1.2")
    if len(pauses) > MAX_PAUSES:  # the limit a range has, for an explicit list too
        raise BadInput(f"{len(pauses)} pauses, more than {MAX_PAUSES} in one grid", where=where,
                       hint="use fewer pauses (a range with a larger step, e.g. 0:4:0.1)")
    for p in pauses:
        if isinstance(p, bool) or not isinstance(p, (int, float)):
            raise BadInput(f"pause {p!r} is not a number", where=where)
        if p < 0:
            raise BadInput(f"pause {p} s is negative", where=where, hint="pauses are seconds >= 0")
        if p > MAX_PAUSE_S:
            raise BadInput(f"pause {p} s is over {MAX_PAUSE_S:.0f} s", where=where)
    return [float(p) for p in pauses]


def parse_sleep_idle(value: object, where: str = "--sleep-idle-seconds") -> int | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "off", "none")):
        return None
    try:
        n = int(str(value))
    except ValueError:
        raise BadInput(f"bad sleep-idle value {value!r}", where=where, hint="seconds >= 1, or 'off'") from None
    if n == -1:
        return None
    if not 1 <= n <= MAX_SLEEP_IDLE_S:
        raise BadInput(f"sleep-idle must be 1..{MAX_SLEEP_IDLE_S} s (or off), got {n}", where=where)
    return n


OMP_WAIT_POLICIES = ("active", "passive")
MAX_OMP_SPINCOUNT = 10**15  # libgomp spins this many times at most; fits the samples table's Int64
MATCH_MODES = ("llama-idle",)


def _default(value: object) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "default"))


def parse_cpu_knob(key: str, value: object, where: str) -> object:
    """One value of a CPU wake axis; None (or "default") leaves the engine's default."""
    if _default(value):
        return None
    text = str(value).strip().lower()
    if key == "omp_spincount":
        if not text.isdigit() or int(text) > MAX_OMP_SPINCOUNT:
            raise BadInput(f"bad GOMP_SPINCOUNT {value!r}", where=where,
                           hint=f"an integer 0..{MAX_OMP_SPINCOUNT:,} (the samples table holds it as a 64-bit "
                                "integer), or default")
        return int(text)
    if key in ("threads", "poll", "prio"):
        try:
            n = int(text)
        except ValueError:
            raise BadInput(f"bad {key} value {value!r}", where=where, hint="an integer, or 'default'") from None
        low, high = {"threads": (1, 512), "poll": (0, 100), "prio": (-1, 3)}[key]
        if not low <= n <= high:
            raise BadInput(f"{key} must be {low}..{high} (or default), got {n}", where=where)
        return n
    if key == "cpu_strict":
        if text in ("1", "true", "on", "yes"):
            return True
        if text in ("0", "false", "off", "no"):
            return False
        raise BadInput(f"bad cpu-strict value {value!r}", where=where, hint="0, 1 or default")
    if key == "cpu_mask":
        digits = text[2:] if text.startswith("0x") else text
        if not digits or any(c not in "0123456789abcdef" for c in digits):
            raise BadInput(f"bad cpu-mask {value!r}", where=where, hint="hex, e.g. 0x1 (CPU 0) or 0x3 (CPUs 0-1)")
        return "0x" + digits
    if key == "cpus":
        cpus = text.replace("+", ",")
        for part in cpus.split(","):
            bounds = part.split("-")
            if not 1 <= len(bounds) <= 2 or not all(b.isdigit() for b in bounds):
                raise BadInput(f"bad CPU list {value!r}", where=where,
                               hint="CPU numbers for taskset -c: 1, 0-1 or 0+1 ('+' because ',' separates values)")
        return cpus
    if key == "omp_wait":
        if text not in OMP_WAIT_POLICIES:
            raise BadInput(f"bad OMP_WAIT_POLICY {value!r}", where=where, hint="active, passive or default")
        return text
    raise AssertionError(key)


CPU_KNOBS = ("threads", "poll", "cpu_strict", "prio", "cpu_mask", "cpus", "omp_wait", "omp_spincount")
def check_idle_engines(engines: list[str], cache_states: list[str], where: str) -> None:
    """One server engine per run; cross-check engines only beside the engine they pair with;
    cache states only where the engine loads a file lbench can see."""
    kinds = [registry.get(e, where) for e in engines]
    for k in kinds:
        if not (k.can("idle") or k.can("cross_check")):
            registry.require(k.name, "idle", where)
    servers = [k.name for k in kinds if k.can("idle")]
    if len(servers) > 1:
        raise BadInput(f"one server engine per run, got {', '.join(servers)}", where=where,
                       hint="run them separately and use `lbench compare`; llama-idle can join llama-server")
    for k in kinds:
        if k.can("cross_check") and servers and servers != [k.pairs_with]:
            raise BadInput(f"the {k.name} cross-check pairs with {k.pairs_with} only", where=where)
    if any(c != "as-is" for c in cache_states):
        for k in kinds:
            registry.require(k.name, "local_model", where, why="take a cache state (it loads no file lbench can see)",
                             hint="drop --cache-state, or use an engine that loads a local model file")


def check_axes(spec: object, keys: tuple[str, ...], where: str) -> None:
    """The list fields whose items have their own parsers: a list (or one value) of plain values
    (text, numbers, booleans), never a table or a nested list, before those parsers see them."""
    for key in keys:
        value = getattr(spec, key)
        items = value if isinstance(value, list) else [value]
        for item in items:
            if item is not None and not isinstance(item, (str, int, float, bool)):
                raise BadInput(f"{key} holds {type(item).__name__} {item!r}"[:300] + ", expected text or numbers",
                               where=f"{where}: {key}", hint="fix the value in the spec (TOML) or on the command line")


def check_types(spec: object, where: str) -> None:
    """Refuse a value of the wrong type (a spec file can hold anything) before the checks that
    compare or convert it: every field against its annotation (harness/typed_toml.py: an int is a
    float, a bool is not a number, lists item by item).  Lists whose items have their own parsers
    (pauses, keep-alive, CPU axes) are left to those."""
    typed_toml.check_fields(spec, where, skip=PARSED_FIELDS,
                            fix="fix the value in the spec (TOML) or on the command line")


# fields whose values go through their own parser (which accepts strings such as "off" or "0:4:0.8")
PARSED_FIELDS = frozenset({"pauses_s", "keep_alive", "sleep_idle_seconds", "cache_state", "engines", "prompt_tokens",
                           *CPU_KNOBS})


@dataclass
class IdleSpec:
    name: str = "idle"
    models: list[str] = field(default_factory=lambda: [DEFAULT_MODEL])
    pauses_s: list[float] = field(default_factory=lambda: list(DEFAULT_PAUSES_S))
    reps: int = 6  # the fewest that give a 95% interval for each pause's median
    warmup: int = 3
    seed: int = 0
    keep_alive: list[str] = field(default_factory=lambda: ["default"])
    sleep_idle_seconds: list[int | None] = field(default_factory=lambda: [None])
    ctx_size: int = 2048  # lowered to the model's trained context when smaller, unless given (ctx_size_given)
    server_args: list[str] = field(default_factory=list)
    # passed knowingly on the command line (--unsafe-server-arg, --unsafe-server-env NAME=VALUE), never from a
    # spec file (engines/server_policy.py)
    unsafe_server_args: list[str] = field(default_factory=list)
    unsafe_server_env: list[str] = field(default_factory=list)
    shuffle: bool = True  # shuffle pause order per repetition (off only for calibration blocks)
    cache_state: list[str] = field(default_factory=lambda: ["as-is"])
    engines: list[str] = field(default_factory=lambda: ["llama-server"])
    # CPU wake axes (llama-server); None = the server's default.  See Setting.
    threads: list = field(default_factory=lambda: [None])
    poll: list = field(default_factory=lambda: [None])
    cpu_strict: list = field(default_factory=lambda: [None])
    prio: list = field(default_factory=lambda: [None])
    cpu_mask: list = field(default_factory=lambda: [None])
    cpus: list = field(default_factory=lambda: [None])
    omp_wait: list = field(default_factory=lambda: [None])
    omp_spincount: list = field(default_factory=lambda: [None])
    match: str | None = None  # "llama-idle": server and request do llama-idle's work (docs/instrument.md)
    self_check: int = 10  # back-to-back calibration requests at the start of every server cell (0 = off)
    # harness process placement, opt-in (they change what is measured; recorded in the manifest)
    client_cpus: str | None = None  # os.sched_setaffinity of lbench itself, e.g. "0"
    client_nice: int | None = None  # os.setpriority of lbench itself (negative needs privileges)
    client_spin: bool = False  # busy-poll the socket for the response instead of sleeping in recv
    # deadlines (docs/reliability.md); None = derived from the cell's warm-up and start-up times
    request_timeout_s: float | None = None  # one request; past it the cell fails (a frozen server)
    cell_timeout_s: float | None = None  # one cell's whole sweep, warm-up included
    ctx_size_given: bool = False  # ctx_size came from the user (option or spec file): checked, never lowered
    # knob axes (harness/knob_axes.py): "NAME=v1,v2" per variable, argument sets, new prompt tokens per request
    env_axis: list[str] = field(default_factory=list)
    server_args_axis: list[str] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=lambda: [0])
    # device probes sampled through each pause (harness/probes/devices; docs/probes.md)
    # off until a run shows sampling within 2% of off (docs/probes.md: the one measurement here was inconclusive)
    device_probes: str = "off"  # auto (every available source), off, or a comma list (nvml,drm,fdinfo,...)
    device_interval_s: float = 0.5  # one reading per this many seconds at most (bounded below by 0.1 s)
    device_interleave: bool = False  # sampling on in half the repetitions, off in the other (perturbation)

    def settings(self) -> list[Setting]:
        import itertools

        axes = [getattr(self, k) for k in CPU_KNOBS]
        envs = knob_axes.env_cells(self.keep_alive, self.env_axis)  # --keep-alive is one env axis instance
        arg_sets = [knob_axes.parse_server_args_value(a) for a in self.server_args_axis] or [()]
        return [Setting(k, s, c, **dict(zip(CPU_KNOBS, knobs)), env=env, server_args=args, prompt_tokens=n)
                for k, env in envs for s in self.sleep_idle_seconds
                for c in self.cache_state for knobs in itertools.product(*axes)
                for args in arg_sets for n in self.prompt_tokens]

    def validate(self, where: str = "spec") -> "IdleSpec":
        check_types(self, where)
        check_axes(self, ("pauses_s", "keep_alive", "sleep_idle_seconds", "cache_state", "engines", *CPU_KNOBS), where)
        server_policy.check_args(self.server_args, f"{where}: server_args / --server-arg")
        server_policy.check_unsafe_args(self.unsafe_server_args)
        check_model_refs(self.models, where)
        if not self.models:
            raise BadInput("no models given", where=where, hint="--model tiny-q8 (or a .gguf path)")
        self.pauses_s = validate_pauses(list(self.pauses_s), f"{where}: pauses")
        check_name(self.name, where)
        for key, minimum, maximum in (("reps", 1, MAX_REPS), ("warmup", 0, MAX_WARMUP), ("ctx_size", 64, MAX_CTX),
                                      ("seed", 0, MAX_SEED)):
            check_int(self, key, minimum, maximum, where)
        self.keep_alive = [parse_keep_alive(k, f"{where}: keep_alive") for k in self.keep_alive] or ["default"]
        self.sleep_idle_seconds = [parse_sleep_idle(s, f"{where}: sleep_idle_seconds")
                                   for s in self.sleep_idle_seconds] or [None]
        for c in self.cache_state:
            if c not in CACHE_STATES:
                raise BadInput(f"bad cache state {c!r}", where=f"{where}: --cache-state",
                               hint="as-is, warm (read the model file in first) or cold (evict it first)")
        self.cache_state = list(dict.fromkeys(self.cache_state)) or ["as-is"]
        self.engines = list(dict.fromkeys(self.engines)) or ["llama-server"]
        for key in CPU_KNOBS:
            values = getattr(self, key)
            values = values if isinstance(values, list) else [values]
            setattr(self, key, list(dict.fromkeys(parse_cpu_knob(key, v, f"{where}: --{key.replace('_', '-')}")
                                                  for v in values)) or [None])
        if self.match is not None and self.match not in MATCH_MODES:
            raise BadInput(f"unknown match mode {self.match!r}", where=f"{where}: --match",
                           hint="llama-idle (do llama-idle's per-iteration work through the server)")
        check_int(self, "self_check", 0, MAX_SELF_CHECK, where)
        for key in ("request_timeout_s", "cell_timeout_s"):
            check_timeout(self, key, where, "derived from the warm-up")
        if self.client_cpus is not None:
            cpus = parse_cpu_knob("cpus", self.client_cpus, f"{where}: --client-cpus")
            assert cpus is None or isinstance(cpus, str)  # the cpus knob parses to a taskset CPU list
            self.client_cpus = cpus
        if self.client_nice is not None and not (-20 <= int(self.client_nice) <= 19):
            raise BadInput(f"client nice must be -20..19, got {self.client_nice}", where=f"{where}: --client-nice")
        check_idle_engines(self.engines, self.cache_state, f"{where}: --engine")
        self.check_knob_axes(where)
        check_unsafe_env(self.unsafe_server_env, [n for n, _ in knob_axes.env_axes(self.env_axis)],
                         self.server_engine, where)
        check_device_sampling(self, where)
        self.check_size(where)
        if self.match is not None:  # the match mode names the cross-check engine whose work the server does
            pairs = registry.get(self.match, f"{where}: --match").pairs_with
            if pairs != self.server_engine:
                raise BadInput(f"--match {self.match} works with {pairs} only", where=f"{where}: --match",
                               hint=f"drop --match, or use --engine {pairs}")
        return self

    def check_knob_axes(self, where: str) -> None:
        """The env, server-args and prompt-length axes (harness/knob_axes.py), parsed and checked."""
        check_axes(self, ("prompt_tokens",), where)
        knob_axes.env_axes(self.env_axis)  # names, values, the loopback rule, duplicates
        sets = [knob_axes.parse_server_args_value(a, f"{where}: --server-args-axis") for a in self.server_args_axis]
        self.server_args_axis = [shlex.join(s) for s in dict.fromkeys(sets)]
        self.prompt_tokens = list(dict.fromkeys(knob_axes.parse_prompt_tokens(n, f"{where}: --prompt-tokens")
                                                for n in (self.prompt_tokens or [0]))) or [0]
        too_long = [n for n in self.prompt_tokens if n + 2 > self.ctx_size]
        if too_long:
            raise BadInput(f"a prompt of {too_long[0]} tokens does not fit the context of {self.ctx_size}",
                           where=f"{where}: --prompt-tokens", hint=f"raise --ctx-size above {too_long[0] + 1}, "
                                                                   "or ask for fewer tokens")
        if self.env_axis or self.server_args_axis or self.prompt_tokens != [0]:
            registry.require(self.server_engine, "knob_axes", f"{where}: --engine",
                             why="take --env-axis, --server-args-axis or --prompt-tokens",
                             hint="drop them, or use --engine " + " / ".join(registry.names("knob_axes")))

    def check_size(self, where: str) -> None:
        """The run's size from its axes' lengths, before any list of cells is built."""
        n_settings = knob_axes.n_env_settings(self.env_axis, self.keep_alive) * max(len(self.server_args_axis), 1) \
            * max(len(self.prompt_tokens), 1)
        for axis in (self.sleep_idle_seconds, self.cache_state,
                     *(getattr(self, k) for k in CPU_KNOBS)):
            n_settings *= max(len(axis), 1)
        cells = len(self.models) * n_settings * max(len(self.engines), 1)
        if cells > MAX_CELLS:
            raise BadInput(f"{cells} cells (models x settings x engines), more than {MAX_CELLS} in one run",
                           where=where, hint="split the run, or give fewer values per axis")
        requests = cells * len(self.pauses_s) * (self.reps + self.warmup)
        if requests > MAX_IDLE_REQUESTS:
            raise BadInput(f"{requests} requests (cells x pauses x (reps + warm-up)), more than {MAX_IDLE_REQUESTS} "
                           "in one run", where=where, hint="use fewer pauses, repetitions or cells")

    @property
    def server_engine(self) -> str:
        """The engine serving HTTP in this run (cross-check engines join it)."""
        cross = self.cross_check_engine
        default = registry.get(cross).pairs_with if cross else None
        return next((e for e in self.engines if not registry.get(e).can("cross_check")), default or "llama-server")

    @property
    def cross_check_engine(self) -> str | None:
        """The in-process reference engine joining the server engine (llama-idle), if any."""
        return next((e for e in self.engines if registry.get(e).can("cross_check")), None)

    @property
    def server_engine_named(self) -> bool:
        """Whether a server engine was asked for (not only a cross-check engine)."""
        return any(not registry.get(e).can("cross_check") for e in self.engines)

    def as_dict(self) -> dict:
        return asdict(self)


COMMAND_LINE_ONLY = frozenset({"unsafe_server_args", "unsafe_server_env"})  # what a spec file (untrusted) may never set


def check_unsafe_env(items: list[str], axis_names: list[str], engine: str, where: str) -> None:
    """``--unsafe-server-env NAME=VALUE``: its form and the loopback rule (engines/server_policy.py), a
    name no other option of the run sets, and an engine whose environment lbench sets."""
    names = server_policy.parse_unsafe_env(items)
    if not names:
        return
    clash = next((n for n in names if n in axis_names or n in knob_axes.OWNED_ENV), None)
    if clash is not None:
        other = knob_axes.OWNED_ENV.get(clash, "--env-axis (or the swap spec's env)")
        raise BadInput(f"{clash} is set by both --unsafe-server-env and {other}", where=f"{where}: --unsafe-server-env",
                       hint="give it once")
    registry.require(engine, "knob_axes", f"{where}: --engine", why="take --unsafe-server-env (lbench does not set "
                     "its environment)", hint="drop --unsafe-server-env, or use --engine "
                     + " / ".join(registry.names("knob_axes")))


def _spec_table(path: Path, section: str, spec_class: type, example_hint: str) -> dict:
    """The keys of a TOML spec (its ``[section]`` table, or the top level), refused when the file
    is missing, is not TOML, or names a key ``spec_class`` does not have."""
    where = str(path)
    if not path.is_file():
        raise BadInput(f"spec file not found: {path}", hint=example_hint)
    data = read_toml(path, "spec file")
    table = data.get(section, data)
    if not isinstance(table, dict):
        raise BadInput(f"[{section}] in the spec must be a table, got {type(table).__name__}", where=where,
                       hint=f"write [{section}] on its own line, then key = value lines (or the keys at the top)")
    known = {f.name for f in fields(spec_class)} - COMMAND_LINE_ONLY
    if COMMAND_LINE_ONLY & set(table):
        raise BadInput(f"{', '.join(sorted(COMMAND_LINE_ONLY & set(table)))} is never read from a spec file",
                       where=where, hint="a server argument or variable lbench refuses is passed knowingly on the "
                                         "command line: --unsafe-server-arg ARG, --unsafe-server-env NAME=VALUE "
                                         "(recorded in the manifest)")
    unknown = sorted(set(table) - known)
    if unknown:
        raise BadInput(f"unknown keys in {section} spec: {', '.join(unknown)}", where=where,
                       hint=f"known keys: {', '.join(sorted(known))}")
    return dict(table)


def load_spec(path: Path) -> IdleSpec:
    where = str(path)
    kwargs = _spec_table(path, "idle", IdleSpec, "see experiments/idle/ for examples")
    if "pauses_s" in kwargs and isinstance(kwargs["pauses_s"], str):
        kwargs["pauses_s"] = parse_pauses(kwargs["pauses_s"], where)
    for key in ("models", "keep_alive", "sleep_idle_seconds", "server_args", "pauses_s", "cache_state", "engines",
                "env_axis", "server_args_axis", "prompt_tokens", *CPU_KNOBS):
        if key in kwargs and not isinstance(kwargs[key], list):
            kwargs[key] = [kwargs[key]]
    if "ctx_size" in kwargs:
        kwargs["ctx_size_given"] = True
    return IdleSpec(**kwargs).validate(where)


SWAP_PATTERNS = ("round-robin", "uniform", "zipf", "ping-pong", "burst")


def check_device_sampling(spec: IdleSpec, where: str) -> None:
    """The device-probe fields' forms (which probes exist is checked when the run is prepared)."""
    if not isinstance(spec.device_probes, str) or not spec.device_probes.strip():
        raise BadInput(f"bad device probes {spec.device_probes!r}", where=f"{where}: --device-probes",
                       hint="auto, off, or a comma list such as nvml,fdinfo (lbench probes lists them)")
    interval = spec.device_interval_s
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not MIN_INTERVAL_S <= interval <= 60:
        raise BadInput(f"device sampling interval {interval!r} s is outside {MIN_INTERVAL_S:g}..60 s",
                       where=f"{where}: --device-interval",
                       hint=f"at least {MIN_INTERVAL_S:g} s (the bounded rate), e.g. --device-interval 0.5")
    spec.device_interval_s = float(interval)
    if spec.device_interleave and spec.device_probes.strip().lower() in ("off", "none"):
        raise BadInput("--device-interleave needs device probes", where=f"{where}: --device-probes",
                       hint="drop --device-probes off, or drop --device-interleave")


def check_int(spec: object, key: str, minimum: int, maximum: int, where: str) -> None:
    """An integer field in [minimum, maximum] (a bool is not an integer)."""
    value = getattr(spec, key)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise BadInput(f"{key} must be an integer >= {minimum} and <= {maximum}, got {value!r}"[:300],
                       where=f"{where}: --{key.replace('_', '-')}")


def check_model_refs(models: object, where: str) -> None:
    """Model references (aliases or .gguf paths) that a file system can hold: no name of a folder
    level over 255 bytes, 4096 in all (was an ``ENAMETOOLONG`` traceback)."""
    for ref in models if isinstance(models, list) else []:
        text = str(ref)
        if len(text.encode()) > 4096 or any(len(part.encode()) > 255 for part in text.split("/")):
            raise BadInput(f"model file name too long ({len(text):,} characters): {text[:80]}…", where=f"{where}: models",
                           hint="a name is at most 255 bytes per folder level (4096 in all); rename the file")


def check_name(name: object, where: str) -> None:
    """A run's name (shown in listings and reports): 1 to MAX_NAME characters, none a control character."""
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME or not name.isprintable():
        raise BadInput(f"bad run name {name!r}"[:300], where=f"{where}: name",
                       hint=f"1-{MAX_NAME} printable characters")


def check_timeout(spec: object, key: str, where: str, default: str) -> None:
    """A deadline in seconds: unset (None, derived) or a finite number in (0, MAX_TIMEOUT_S]."""
    value = getattr(spec, key)
    if value is None:
        return
    option = "--" + key.removesuffix("_s").replace("_", "-")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= MAX_TIMEOUT_S:
        raise BadInput(f"{key} must be seconds in (0, {MAX_TIMEOUT_S:g}], got {value!r}",
                       where=f"{where}: {option}", hint=f"or leave it unset: {default}")
    setattr(spec, key, float(value))


@dataclass
class SwapSpec:
    name: str = "swap"
    models: list[str] = field(default_factory=lambda: ["tiny-q8", "tiny-q4", "tiny-f16"])
    models_max: int = 2
    pattern: str = "round-robin"
    requests: int = 30
    duration_s: float | None = None
    concurrency: int = 1
    seed: int = 0
    zipf_s: float = 1.1
    burst_k: int = 3
    n_predict: int = 1
    sleep_idle_seconds: int | None = None
    stop_timeout_s: int | None = None
    ctx_size: int = 512
    parallel: int = 1
    server_args: list[str] = field(default_factory=list)
    # passed knowingly on the command line (--unsafe-server-arg, --unsafe-server-env NAME=VALUE), never from a
    # spec file (engines/server_policy.py)
    unsafe_server_args: list[str] = field(default_factory=list)
    unsafe_server_env: list[str] = field(default_factory=list)
    sample_hz: float = 100.0
    reuse_connections: bool = False
    cache_state: str = "as-is"  # cold: evict a model's file from the page cache before each swap-in
    engine: str = "llama-server"  # or "mlx" (mlx_lm.server reloads when a request names another model)
    # one request's deadline (docs/reliability.md); None = derived from the model sizes and the concurrency
    request_timeout_s: float | None = None
    # the router's environment, "NAME=value" ("NAME=unset": removed); one value of each --env-axis
    env: list[str] = field(default_factory=list)
    # a timed sequence instead of a pattern: "A@0,B@0.1" or "@file" (harness/workloads/sequence.py)
    sequence: str | None = None
    stagger_s: float | None = None  # every model once, in order, this many seconds apart
    repeat: int = 1  # storms of the spec, one after the other, each on a fresh router (one run each)
    # the first request after each starting state instead of a storm (runs/swap_first.py): cold, warm, evicted, slept
    first_request: list[str] = field(default_factory=list)
    first_reps: int = 5  # repetitions of every (state, model) first request, each on a fresh router

    def timed_steps(self, where: str = "swap options") -> list[sequence_mod.Step] | None:
        """The timed sequence's steps as written (letters unresolved), or None for a pattern storm."""
        if self.sequence is not None and self.stagger_s is not None:
            raise BadInput("both a sequence and a stagger", where=f"{where}: --sequence / --stagger",
                           hint="give one: --sequence 'A@0,B@0.1' or --stagger 0.1")
        if self.sequence is not None:
            return sequence_mod.parse(sequence_mod.read_source(self.sequence, f"{where}: --sequence"),
                                      f"{where}: --sequence")
        if self.stagger_s is not None:
            return sequence_mod.stagger(len(self.models), self.stagger_s, f"{where}: --stagger")
        return None

    def env_pairs(self) -> tuple[tuple[str, str | None], ...]:
        pairs = []
        for item in self.env:
            name, values = knob_axes.parse_env_axis(item, "swap: env")
            if len(values) != 1:
                raise BadInput(f"swap env {item!r} holds {len(values)} values", where="swap: env",
                               hint="one value per storm (--env-axis NAME=a,b runs one storm per value)")
            pairs.append((name, values[0]))
        return tuple(pairs)

    def validate(self, where: str = "swap options") -> "SwapSpec":
        check_types(self, where)
        self.env_pairs()  # names, one value each, the loopback rule
        server_policy.check_args(self.server_args, f"{where}: server_args / --server-arg")
        server_policy.check_unsafe_args(self.unsafe_server_args)
        check_unsafe_env(self.unsafe_server_env, [n for n, _ in self.env_pairs()], self.engine, where)
        check_timeout(self, "request_timeout_s", where, "derived from the models and the concurrency")
        check_model_refs(self.models, where)
        one_is_enough = bool(self.first_request) and "evicted" not in self.first_request
        if len(self.models) < (1 if one_is_enough else 2):  # a first request after a cold start needs one model
            what = "--first-request evicted (another model is loaded first)" if self.first_request else "a swap storm"
            raise BadInput(f"{what} needs at least two models, got {len(self.models)}", where=f"{where}: --model",
                           hint="give at least two with --model (e.g. -m tiny-q8 -m tiny-q4); one model never swaps "
                                "(for its idle behaviour use lbench idle)")
        check_name(self.name, where)
        if len(self.models) > MAX_SWAP_MODELS:
            raise BadInput(f"{len(self.models)} models, more than {MAX_SWAP_MODELS}", where=f"{where}: --model")
        if isinstance(self.models_max, bool) or not isinstance(self.models_max, int) \
                or not 0 <= self.models_max <= MAX_MODELS_MAX:
            raise BadInput(f"models_max must be an integer >= 0 (0 = no cap) and <= {MAX_MODELS_MAX}, got "
                           f"{self.models_max!r}"[:300], where=f"{where}: --models-max")
        for key, minimum, maximum in (("requests", 1, MAX_SWAP_REQUESTS), ("concurrency", 1, MAX_CONCURRENCY),
                                      ("n_predict", 1, MAX_N_PREDICT), ("ctx_size", 64, MAX_CTX),
                                      ("parallel", 1, MAX_PARALLEL), ("seed", 0, MAX_SEED),
                                      ("burst_k", 1, MAX_SWAP_REQUESTS), ("repeat", 1, MAX_REPS)):
            check_int(self, key, minimum, maximum, where)
        self.timed_steps(where)  # the syntax; the models it names once they are resolved (runs/swap.py)
        check_int(self, "first_reps", 1, MAX_REPS, where)
        for state in self.first_request:
            if state not in FIRST_STATES:
                raise BadInput(f"unknown first-request state {state!r}", where=f"{where}: --first-request",
                               hint=f"use some of: {', '.join(FIRST_STATES)}, e.g. --first-request cold,warm")
        if self.first_request and (self.sequence is not None or self.stagger_s is not None):
            raise BadInput("a first-request measurement sends its own requests", where=f"{where}: --first-request",
                           hint="drop --sequence / --stagger, or --first-request")
        if self.first_request:
            registry.require(self.engine, "router_events", f"{where}: --engine", why="split a first request into phases")
            if any(s in ("cold", "warm") for s in self.first_request):
                registry.require(self.engine, "local_model", f"{where}: --engine", why="take a cache state")
            if "slept" in self.first_request:
                registry.require(self.engine, "sleep_idle", f"{where}: --engine", why="sleep idle models")
        if not math.isfinite(self.zipf_s) or not 0 < self.zipf_s <= MAX_ZIPF_S:
            raise BadInput(f"zipf_s must be a number in (0, {MAX_ZIPF_S:g}], got {self.zipf_s!r}",
                           where=f"{where}: --zipf-s", hint="e.g. --zipf-s 1.1 (larger: more skewed)")
        if self.pattern not in SWAP_PATTERNS:
            raise BadInput(f"unknown pattern {self.pattern!r}", where=f"{where}: --pattern",
                           hint=f"use one of: {', '.join(SWAP_PATTERNS)}")
        if self.duration_s is not None and not (0 < self.duration_s <= MAX_TIMEOUT_S):
            raise BadInput(f"duration must be in (0, {MAX_TIMEOUT_S:g}] s, got {self.duration_s}",
                           where=f"{where}: --duration")
        if not (1.0 <= self.sample_hz <= 1000.0):
            raise BadInput(f"sample rate must be 1-1000 Hz, got {self.sample_hz}", where=f"{where}: --sample-hz")
        kind = registry.require(self.engine, "swap", f"{where}: --engine")
        if self.cache_state not in CACHE_STATES:
            raise BadInput(f"bad cache state {self.cache_state!r}", where=f"{where}: --cache-state",
                           hint="as-is, warm or cold")
        if self.cache_state != "as-is":
            registry.require(kind.name, "local_model", f"{where}: --engine", why="take a cache state")
        if self.stop_timeout_s is not None and not 1 <= self.stop_timeout_s <= MAX_SLEEP_IDLE_S:
            raise BadInput(f"stop-timeout must be 1..{MAX_SLEEP_IDLE_S} s, got {self.stop_timeout_s}",
                           where=f"{where}: --stop-timeout")
        self.sleep_idle_seconds = parse_sleep_idle(self.sleep_idle_seconds, f"{where}: --sleep-idle-seconds")
        if self.sleep_idle_seconds is not None:
            registry.require(kind.name, "sleep_idle", f"{where}: --sleep-idle-seconds",
                             why="sleep idle models (it has no --sleep-idle-seconds)",
                             hint="drop --sleep-idle-seconds, or use --engine "
                                  + " / ".join(registry.names("sleep_idle")))
        return self

    def as_dict(self) -> dict:
        return asdict(self)


def load_swap_spec(path: Path) -> SwapSpec:
    """A swap spec from TOML (a ``[swap]`` table or top-level keys); keys it omits keep SwapSpec's defaults."""
    where = str(path)
    kwargs = _spec_table(path, "swap", SwapSpec, "see experiments/swap/ for an example (--spec default)")
    for key in ("models", "server_args"):
        if key in kwargs and not isinstance(kwargs[key], list):
            kwargs[key] = [kwargs[key]]
    return SwapSpec(**kwargs).validate(where)
