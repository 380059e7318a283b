"""``recipe.sh`` for an idle-equivalence claim (harness/repro/idle_scenarios.py): the experiment and
its verdict in bash, curl and awk.

The script starts llama-server ``starts`` times per model with lbench's command line and
environment, sends lbench's one-token request (3 unmeasured warm-ups), then the pauses in the
order lbench ran them (the same seeded shuffle), timing each request with curl.  awk then
decides each (model, long pause) group as harness.analysis.verdicts does: per server start the
log of the median latency (short pauses pooled; each long pause alone), Welch's t over the
starts (one start on a side: the pooled t; one on each: inconclusive), the 95% interval of the
log ratio against the band [1/(1+margin), 1+margin], and Holm's step-down over the groups for
``slower``/``faster``.  awk has no t distribution: the script computes it (the regularized
incomplete beta function by its continued fraction, the quantile by bisection) and first checks
itself against the quantiles scipy gave when the recipe was written (exit 2 when they differ).
The group counts are the claim's figures; its ``[[check]]`` requirements are judged on them
(harness.repro.recipe.verdict_lines) and the verdict is compared with lbench's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import shell
from harness.repro.recipe import ClaimSpec, verdict_lines

if TYPE_CHECKING:
    from harness.engines.binary import Binary

# the t distribution in awk: lgamma (Lanczos, g = 7), the regularized incomplete beta function
# (Numerical Recipes' continued fraction), P(T > t), and the quantile by bisection
T_AWK = r"""
function lgam(x,   c, i, s, t, pi) {
  pi = 3.141592653589793
  if (x < 0.5) return log(pi / sin(pi * x)) - lgam(1 - x)
  split("0.99999999999980993 676.5203681218851 -1259.1392167224028 771.32342877765313 " \
        "-176.61502916214059 12.507343278686905 -0.13857109526572012 9.9843695780195716e-6 " \
        "1.5056327351493116e-7", c, " ")
  x -= 1; s = c[1]
  for (i = 1; i < 9; i++) s += c[i + 1] / (x + i)
  t = x + 7.5
  return 0.5 * log(2 * pi) + (x + 0.5) * log(t) - t + log(s)
}
function tiny(v) { return (v < 1e-300 && v > -1e-300) ? 1e-300 : v }
function betacf(a, b, x,   m, m2, aa, c, d, del, h) {
  c = 1; d = 1 / tiny(1 - (a + b) * x / (a + 1)); h = d
  for (m = 1; m <= 500; m++) {
    m2 = 2 * m
    aa = m * (b - m) * x / ((a - 1 + m2) * (a + m2))
    d = 1 / tiny(1 + aa * d); c = tiny(1 + aa / c); h *= d * c
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1 + m2))
    d = 1 / tiny(1 + aa * d); c = tiny(1 + aa / c); del = d * c; h *= del
    if (del - 1 < 1e-15 && del - 1 > -1e-15) break
  }
  return h
}
function ibeta(a, b, x,   bt) {
  if (x <= 0) return 0
  if (x >= 1) return 1
  bt = exp(lgam(a + b) - lgam(a) - lgam(b) + a * log(x) + b * log(1 - x))
  if (x < (a + 1) / (a + b + 2)) return bt * betacf(a, b, x) / a
  return 1 - bt * betacf(b, a, 1 - x) / b
}
function tsf(t, df,   p) { p = 0.5 * ibeta(df / 2, 0.5, df / (df + t * t)); return t >= 0 ? p : 1 - p }
function tq(p, df,   lo, hi, mid, i) {
  lo = 0; hi = 1e7
  for (i = 0; i < 200; i++) { mid = (lo + hi) / 2; if (1 - tsf(mid, df) < p) lo = mid; else hi = mid }
  return (lo + hi) / 2
}
"""

# the groups' verdicts from "model start pause seconds" lines (times.txt)
DECIDE_AWK = T_AWK + r"""
function median(v, n,   i, j, t) {
  for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
  return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
function level(m, s, pauses, np,   i, j, n, v) {  # log median of start s's samples at these pauses; "" if none
  n = 0
  for (i = 1; i <= np; i++) for (j = 1; j <= cnt[m, s, pauses[i]]; j++) v[++n] = x[m, s, pauses[i], j]
  got = n
  return n ? log(median(v, n)) : ""
}
function ss(y, n, mean,   i, t) { t = 0; for (i = 1; i <= n; i++) t += (y[i] - mean) ^ 2; return t }
$4 > 0 { x[$1, $2, $3, ++cnt[$1, $2, $3]] = $4 * 1000 }
END {
  ns = split(short, S, " "); nl = split(long, L, " "); split(ENVIRON["NAMES"], names, "\n")
  lm = log(1 + margin); side = alpha / 2; k = 0
  for (m = 1; m <= nmodels; m++) for (q = 1; q <= nl; q++) {
    g++; na = nb = sa = sb = 0; ma = mb = 0; P[1] = L[q]
    for (s = 1; s <= starts; s++) {
      y = level(m, s, S, ns); if (y != "") { ya[++na] = y; ma += y; sa += got }
      y = level(m, s, P, 1); if (y != "") { yb[++nb] = y; mb += y; sb += got }
    }
    name[g] = names[m] " pause=" L[q] "s"
    if (sa < minn || sb < minn) { vd[g] = "refused"; continue }
    ma /= na; mb /= nb; diff = mb - ma; ratio[g] = exp(diff)
    if (na >= 2 && nb >= 2) {
      va = ss(ya, na, ma) / (na - 1) / na; vb = ss(yb, nb, mb) / (nb - 1) / nb; se = sqrt(va + vb)
      df = (va + vb) > 0 ? (va + vb) ^ 2 / (va ^ 2 / (na - 1) + vb ^ 2 / (nb - 1)) : na + nb - 2
    } else if (na + nb >= 3) {
      df = na + nb - 2; se = sqrt((ss(ya, na, ma) + ss(yb, nb, mb)) / df) * sqrt(1 / na + 1 / nb)
    } else { vd[g] = "inconclusive"; lo[g] = "-inf"; hi[g] = "inf"; continue }
    if (se == 0) {
      l = h = diff; ps[g] = diff > lm ? 0 : 1; pf[g] = diff < -lm ? 0 : 1
    } else {
      t = tq(1 - alpha / 2, df); l = diff - t * se; h = diff + t * se
      ps[g] = tsf((diff - lm) / se, df); pf[g] = 1 - tsf((diff + lm) / se, df)
    }
    lo[g] = exp(l); hi[g] = exp(h)
    vd[g] = (l >= -lm && h <= lm) ? "no change" : (l > lm ? "slower" : (h < -lm ? "faster" : "inconclusive"))
    fam[++k] = g
  }
  holm(ps, adj_s); holm(pf, adj_f)
  for (i = 1; i <= k; i++) {
    j = fam[i]
    if (vd[j] == "slower" && adj_s[j] >= side) vd[j] = "inconclusive"
    if (vd[j] == "faster" && adj_f[j] >= side) vd[j] = "inconclusive"
  }
  for (j = 1; j <= g; j++) {
    printf "  %s: %s (ratio %s, 95%% interval %s to %s)\n", name[j], vd[j], ratio[j], lo[j], hi[j] > "/dev/stderr"
    c[vd[j]]++
  }
  printf "%d %d %d %d %d\n", g, c["no change"], c["slower"], c["faster"], c["inconclusive"] + c["refused"]
}
function holm(p, out,   i, j, r, t, order, run) {  # Holm's step-down over the family (fam[1..k])
  for (i = 1; i <= k; i++) order[i] = fam[i]
  for (i = 2; i <= k; i++) {
    t = order[i]; for (j = i - 1; j >= 1 && p[order[j]] > p[t]; j--) order[j + 1] = order[j]; order[j + 1] = t
  }
  run = 0
  for (r = 1; r <= k; r++) { t = (k - r + 1) * p[order[r]]; if (t > 1) t = 1; if (t > run) run = t; out[order[r]] = run }
}
"""


def _scipy_quantiles(alpha: float, dfs: list[int]) -> dict[int, float]:
    from scipy import stats

    return {df: float(stats.t.ppf(1 - alpha / 2, df)) for df in dfs}


def write_equivalence_recipe(path: Path, *, spec: ClaimSpec, lbench_verdict: str | None, binary: Binary,
                             models: list[dict[str, Any]],
                             short: list[float], long: list[float], starts: int, reps: int, margin: float,
                             alpha: float, min_samples: int, warmup: int, schedules: dict[int, list[float]]) -> None:
    """``models``: per model ``label``, ``path``, ``synthetic``/``preset``/``quant``/``sha256`` (as
    model_recipe reads them), the server ``argv`` and request ``body`` lbench used, ``env`` (the
    variables lbench set); ``schedules``: per start, the pauses in the order they ran."""
    from harness.report.rerun import _hash_check, _server_words, model_recipe

    lines = ["#!/usr/bin/env bash",
             "# Rerun of this idle-equivalence claim without lbench: fresh llama-server starts per model, lbench's",
             "# one-token request timed by curl after each pause (the order lbench ran), then the verdict per",
             "# (model, long pause) in awk (Welch t over the starts, Holm over the groups), the claim's checks,",
             "# and the verdict against lbench's (exit 0: reproduced).",
             shell.comment(f"claim {spec.id}: {spec.claim}"),
             shell.comment(f"engine when measured: {binary.path} (version {binary.version}, build {binary.build_number})"),
             "set -u", f"LLAMA_SERVER=${{LLAMA_SERVER:-{shell.quote(str(binary.path))}}}",
             "PORT=${PORT:-18080}", "URL=\"http://127.0.0.1:$PORT\"", "WORK=$(mktemp -d)",
             'mkdir -p "$WORK/llama-cache"', ': > "$WORK/times.txt"']
    dfs = list(range(1, max(2, 2 * starts - 2) + 1))
    quantiles = _scipy_quantiles(alpha, dfs)
    lines += ["# awk's t quantiles checked against scipy's (written when the recipe was)",
              "T_AWK=" + shell.quote(T_AWK),
              "awk \"$T_AWK\"' BEGIN { split(\"" + " ".join(f"{df}:{q:.10f}" for df, q in quantiles.items())
              + f"\", w, \" \"); for (i in w) {{ split(w[i], d, \":\"); got = tq({1 - alpha / 2!r}, d[1]); "
              "if (got - d[2] > 1e-6 || d[2] - got > 1e-6) { printf \"awk t quantile %.8f for df %s, scipy %s\\n\", "
              "got, d[1], d[2]; bad = 1 } } exit bad }' || { echo \"this awk cannot compute the t distribution; "
              "the script stops\" >&2; exit 2; }"]
    lines += ["ask() {  # one request, lbench's body; prints curl's total time in seconds",
              "  curl -s -o /dev/null -w '%{time_total}\\n' -H 'Content-Type: application/json' "
              "--data-binary @\"$WORK/request-$1.json\" \"$URL/completion\"", "}"]
    for i, m in enumerate(models, start=1):
        var = f"MODEL_{i}"
        lines += [shell.comment(line[2:] if line.startswith("# ") else line) for line in model_recipe(m)]
        lines += [f"{var}=${{{var}:-{shell.quote(str(m['label']) + '.gguf')}}}",
                  f'[ -f "${var}" ] || {{ echo "model file missing: ${var} (make it as the comment above says, '
                  f'or set {var}=/path/to/it)" >&2; exit 2; }}']
        lines += _hash_check(var, m.get("sha256"))
        lines.append(f"printf '%s' {shell.quote(m['body'])} > \"$WORK/request-{i}.json\"")
    lines += ["# the curl timing opens a new loopback connection per request where lbench keeps one open: expect",
              "# a small constant on every sample (~0.1-1 ms), which moves ratios of fast decodes a little"]
    for i, m in enumerate(models, start=1):
        server = _server_words(m["argv"], str(binary.path), {"-m": f'"$MODEL_{i}"'})
        env = ['LLAMA_CACHE="$WORK/llama-cache"' if k == "LLAMA_CACHE" else f"{k}={shell.quote(v)}"
               for k, v in sorted(m.get("env", {}).items()) if shell.env_name(k) == k]
        for s in range(1, starts + 1):
            pauses = " ".join(f"{p:g}" for p in schedules[s])
            lines += [shell.comment(f"{m['label']}, server start {s} of {starts}"),
                      f"{' '.join(['env', *env]) + ' ' if env else ''}{server} > \"$WORK/server-{i}-{s}.log\" 2>&1 &",
                      "SERVER=$!", "tries=0",
                      'until curl -sf "$URL/health" > /dev/null; do',
                      '  tries=$((tries + 1)); kill -0 "$SERVER" 2>/dev/null && [ "$tries" -lt 1200 ] || '
                      f'{{ echo "the server did not come up; see $WORK/server-{i}-{s}.log" >&2; '
                      'kill "$SERVER" 2>/dev/null; exit 2; }',
                      "  sleep 0.1", "done",
                      f"for _ in $(seq {int(warmup)}); do ask {i} > /dev/null; done  # unmeasured warm-up",
                      f"for pause in {pauses}; do sleep \"$pause\"; echo \"{i} {s} $pause $(ask {i})\" "
                      ">> \"$WORK/times.txt\"; done",
                      'kill "$SERVER"; wait "$SERVER" 2>/dev/null']
    names = shell.quote("\n".join(str(m["label"]) for m in models))
    lines += ["# ---- the verdict per (model, long pause), as lbench decides it (harness/analysis/verdicts.py)",
              "DECIDE=" + shell.quote(DECIDE_AWK),
              'echo "groups (model, long pause against the short ones):"',
              # the group lines go to stderr (shown), the counts to counts.txt (read back)
              f"NAMES={names} awk -v short=" + shell.quote(" ".join(f"{p:g}" for p in short))
              + " -v long=" + shell.quote(" ".join(f"{p:g}" for p in long))
              + f" -v nmodels={len(models)} -v starts={int(starts)} -v margin={margin!r} -v alpha={alpha!r} "
              f"-v minn={int(min_samples)} \"$DECIDE\" \"$WORK/times.txt\" 2>&1 > \"$WORK/counts.txt\"",
              ]
    figure_names = ["groups", "groups_no_change", "groups_slower", "groups_faster", "groups_undecided"]
    names_map = {}
    lines += ['read -r G_1 G_2 G_3 G_4 G_5 < "$WORK/counts.txt"', 'echo "figures observed:"']
    for j, fig in enumerate(figure_names, start=1):
        names_map[fig] = f"G_{j}"
        lines.append(f"echo \"  {fig}: $G_{j}\"")
    lines.append('echo "samples in $WORK/times.txt (model, start, pause s, seconds)"')
    lines += verdict_lines(names_map, {}, list(spec.check), lbench_verdict)
    path.write_text(shell.script(lines))


def body_text(body: bytes | str | dict) -> str:
    if isinstance(body, dict):
        return json.dumps(body)
    return body.decode() if isinstance(body, bytes) else str(body)
