"""What a real model and a synthetic one of its shape do differently on this machine (a benchmark).

For each model: starts llama-server (lbench's engine path, 127.0.0.1), times how long it takes to
answer /health (load), then sends ``--reps`` greedy completions of one prompt (no prompt cache)
and keeps each response's server timings (prompt ms, generated tokens per second) and its text.
Prints one line per model and writes every raw sample to ``--out`` (JSON).  Load time and the
first-token latency after pauses come from ``lbench idle`` runs; this adds decode speed and text.

    python scripts/real_vs_synthetic.py -m smollm2-135m-instruct-q4_1 -m smollm2-135m-q4_1 --reps 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def measure(ref: str, prompt: str, n_predict: int, reps: int, threads: int | None) -> dict:
    import httpx

    from harness.engines.base import Setting
    from harness.engines.binary import locate
    from harness.engines.llama_server import LlamaServerEngine
    from harness.models.resolve import resolve

    model = resolve(ref)
    engine = LlamaServerEngine(locate(), ctx_size=512, extra_args=["--threads", str(threads)] if threads else None)
    samples = []
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        with engine.start(model.path, Setting(), Path(tmp) / "server.log") as server:
            load_s = time.perf_counter() - t0
            for rep in range(reps):
                body = {"prompt": prompt, "n_predict": n_predict, "temperature": 0, "cache_prompt": False}
                t = time.perf_counter()
                r = httpx.post(f"{server.base_url}/completion", json=body, timeout=600)
                wall_ms = (time.perf_counter() - t) * 1000
                data = r.json() if r.status_code == 200 else {}
                timings = data.get("timings", {})
                samples.append({"rep": rep, "http_status": r.status_code, "wall_ms": wall_ms,
                                "prompt_n": timings.get("prompt_n"), "prompt_ms": timings.get("prompt_ms"),
                                "predicted_n": timings.get("predicted_n"),
                                "predicted_per_second": timings.get("predicted_per_second"),
                                "content": data.get("content")})
    return {"ref": ref, "path": str(model.path), "synthetic": model.synthetic, "bytes": model.info.bytes,
            "quant": model.info.quant, "load_s": load_s, "samples": samples}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", action="append", required=True, help="model ref (repeat)")
    ap.add_argument("--prompt", default="The capital of France is")
    ap.add_argument("--n-predict", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None, help="raw samples (JSON); default: print only")
    args = ap.parse_args()
    if args.reps < 1 or args.n_predict < 1:
        ap.error("--reps and --n-predict must be >= 1")  # exit 2
    results = []
    for ref in args.model:
        res = measure(ref, args.prompt, args.n_predict, args.reps, args.threads)
        results.append(res)
        ok = [s for s in res["samples"] if s["http_status"] == 200]
        tps = [s["predicted_per_second"] for s in ok if s["predicted_per_second"]]
        pms = [s["prompt_ms"] for s in ok if s["prompt_ms"] is not None]
        print(f"{ref}: {'synthetic' if res['synthetic'] else 'real'} {res['quant']} {res['bytes'] / 1e6:.1f} MB; "
              f"load {res['load_s']:.2f} s; prompt ({ok[0]['prompt_n'] if ok else '?'} tokens) median "
              f"{statistics.median(pms) if pms else float('nan'):.1f} ms; decode median "
              f"{statistics.median(tps) if tps else float('nan'):.1f} tokens/s (n={len(tps)} of {args.reps}); "
              f"text: {ok[0]['content']!r}" if ok else f"{ref}: no answer")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"prompt": args.prompt, "n_predict": args.n_predict, "results": results},
                                       indent=2))
        print(f"raw samples: {args.out}")


if __name__ == "__main__":
    main()
