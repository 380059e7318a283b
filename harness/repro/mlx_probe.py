"""In-process probe of mlx-lm's wired-limit handling, run by the MLX claim scenarios in a fresh
subprocess (``python -m harness.repro.mlx_probe MODE [MODEL]``) so each run starts with MLX's
default wired limit (0).  Prints one JSON object per line on stdout; mlx-lm's own messages
(the wired-limit warning) go to stdout too and are kept as ``{"event": "stdout", "text": ...}``.

Modes:
- ``warning``: ``mlx_lm.generate.wired_limit`` entered with two stand-in "models" whose byte
  size (``mx.array.nbytes``, read without evaluating the lazy arrays, so nothing is allocated)
  is 0.95 and 0.85 x ``max_recommended_working_set_size``; records what each printed.
- ``generate MODEL``: ``mlx_lm.generate`` once (max_tokens 1); then ``mx.set_wired_limit(0)``
  returns the limit left behind (0: restored).  Then the server's call,
  ``maybe_set_recommended_wired_limit()``, and the limit it leaves behind.
System wired memory (vm_stat) is recorded around each step.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import Any, cast
from harness.probes.macos import read_wired_bytes


def _emit(**record: object) -> None:
    print(json.dumps(record), flush=True)


def _device_info(mx: Any) -> dict:
    """``mx.device_info()`` (newer mlx); ``mx.metal.device_info`` is deprecated and warns on stderr."""
    return dict(mx.device_info()) if hasattr(mx, "device_info") else dict(mx.metal.device_info())


def _wired() -> int | None:
    return read_wired_bytes()


def warning_mode() -> None:
    import mlx.core as mx
    from mlx_lm.generate import wired_limit

    rec = int(_device_info(mx)["max_recommended_working_set_size"])
    _emit(event="device", recommended_bytes=rec)
    for case, ratio in (("above", 0.95), ("below", 0.85)):
        stand_in = {"w": mx.zeros((int(ratio * rec),), dtype=mx.uint8)}  # lazy: nbytes without allocation
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            with wired_limit(cast(Any, stand_in)):  # a stand-in with the model's size
                pass
        _emit(event="wired_limit", case=case, ratio=ratio, model_bytes=int(stand_in["w"].nbytes),
              printed=out.getvalue())
        mx.set_wired_limit(0)


def generate_mode(model_ref: str) -> None:
    import mlx.core as mx
    from mlx_lm import generate, load

    rec = int(_device_info(mx)["max_recommended_working_set_size"])
    loaded = load(model_ref)  # (model, tokenizer) or, in newer mlx_lm, (model, tokenizer, config)
    model, tokenizer = loaded[0], loaded[1]
    _emit(event="loaded", recommended_bytes=rec, wired_bytes=_wired())
    generate(model, tokenizer, prompt="Hello", max_tokens=1)
    _emit(event="after_generate", wired_bytes=_wired(), prev_limit=int(mx.set_wired_limit(0)))
    # what mlx_lm.server does at start (mlx_lm/server.py, inline since v0.30.1; no mlx-lm release has a
    # maybe_set_recommended_wired_limit function): the wired limit to the recommended working set
    if mx.metal.is_available():
        mx.set_wired_limit(_device_info(mx)["max_recommended_working_set_size"])
    mx.eval(model.parameters())
    _emit(event="after_server_call", wired_bytes=_wired(), prev_limit=int(mx.set_wired_limit(0)))


def main(argv: list[str]) -> int:
    if argv[:1] == ["warning"]:
        warning_mode()
    elif argv[:1] == ["generate"] and len(argv) == 2:
        generate_mode(argv[1])
    else:
        print("usage: python -m harness.repro.mlx_probe warning | generate MODEL", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
