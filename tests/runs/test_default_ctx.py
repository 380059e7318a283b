"""A default the user never set fits the model: the 2048-token default context is lowered to a
smaller trained context; a context the user gave is left for the check to refuse."""

from types import SimpleNamespace

from harness.cli.idle import build_spec
from harness.runs.idle import fit_default_ctx


def _engine(ctx_size):
    """The real llama-server engine object (nothing is started: fit_default_ctx only sets its context)."""
    from pathlib import Path

    from harness.engines.binary import Binary
    from harness.engines.llama_server import LlamaServerEngine

    return LlamaServerEngine(Binary(Path("/x/llama-server"), "test", "v", 11434, "c", "0" * 64), ctx_size=ctx_size)


def _model(n_ctx_train):
    return SimpleNamespace(info=SimpleNamespace(n_ctx_train=n_ctx_train))


def test_the_default_context_is_lowered_to_the_models_trained_context():
    spec = build_spec(None)
    engine = _engine(spec.ctx_size)
    said = []
    fit_default_ctx(spec, engine, [_model(256), _model(4096)], SimpleNamespace(message=said.append))
    assert spec.ctx_size == 256 and engine.ctx_size == 256
    assert said and "256" in said[0]


def test_a_given_context_is_not_changed():
    spec = build_spec(None, ctx_size=2048)
    engine = _engine(2048)
    fit_default_ctx(spec, engine, [_model(256)], SimpleNamespace(message=lambda text: None))
    assert spec.ctx_size == 2048 and spec.ctx_size_given  # the preflight check then refuses it, saying why


def test_a_model_with_room_keeps_the_default():
    spec = build_spec(None)
    fit_default_ctx(spec, _engine(2048), [_model(8192)], SimpleNamespace(message=lambda t: None))
    assert spec.ctx_size == 2048
