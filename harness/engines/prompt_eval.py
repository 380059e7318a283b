"""Prompt evaluation after idle: each request carries N new prompt tokens the server must evaluate.

What users report after an idle pause is prompt evaluation (tokens/s on a long prompt), not one
cached decode.  With ``--prompt-tokens 512`` every request of a cell sends 512 token ids with
``cache_prompt: false``, rotated by one position per request so no two consecutive requests share
a prefix (nothing is reused even by a server that ignored the flag), and ``n_predict: 1``: the
response is the first token, so the client's latency is its time to first token, and the server's
``timings`` say how long the N tokens took (``prompt_ms``, ``prompt_n``, ``prompt_per_second``).

The token ids come from the server's own tokenizer (``POST /tokenize`` of a fixed text, once, when
the server is ready and before any timed request), so they are valid for any model.
"""

from __future__ import annotations

import json

from harness.engines.one_token import OneTokenClient
from harness.engines.timed_http import build_request
from harness.errors import EngineError

SOURCE_TEXT = " ".join(f"The idle wake probe number {i} evaluates a prompt of new tokens." for i in range(64))
MAX_PROMPT_TOKENS = 1 << 16


def token_pool(client: OneTokenClient, n: int) -> list[int]:
    """At least ``n`` token ids from the server's tokenizer (the fixed text, repeated as needed)."""
    body = json.dumps({"content": SOURCE_TEXT, "add_special": False}).encode()
    x = client.connection.exchange(build_request("POST", "/tokenize", client.host, client.port, body,
                                                 {"Content-Type": "application/json"}))
    tokens: list[int] = []
    if x.error is None and x.status == 200 and x.body:
        try:
            tokens = [int(t) for t in json.loads(x.body).get("tokens", [])]
        except (ValueError, TypeError, AttributeError):
            tokens = []
    if len(set(tokens)) < 2:
        raise EngineError("the server's tokenizer gave too few tokens for a prompt-evaluation request",
                          where=f"POST /tokenize -> {x.status or x.error} {(x.body or b'')[:200]!r}",
                          hint="--prompt-tokens needs a model with a tokenizer; use --prompt-tokens 0")
    while len(tokens) < n + 1:
        tokens = tokens + tokens
    return tokens


def request_body(pool: list[int], n: int, k: int) -> dict:
    """The k-th request's body: ``n`` tokens of the pool starting at position k (wrapping)."""
    start = k % len(pool)
    prompt = (pool[start:] + pool[:start])[:n]
    return {"prompt": prompt, "n_predict": 1, "cache_prompt": False,
            "response_fields": OneTokenClient.RESPONSE_FIELDS}


class PromptEvalClient:
    """Wraps a server's one-token client: before each request (outside the timed exchange) the body
    is rebuilt with the next rotation of the token pool."""

    def __init__(self, client: OneTokenClient, n: int):
        if not 1 <= n <= MAX_PROMPT_TOKENS:
            raise ValueError(n)
        self.client = client
        self.n = n
        self.pool = token_pool(client, n)
        self.k = 0

    def next_body(self) -> None:
        self.client.set_body(request_body(self.pool, self.n, self.k))
        self.k += 1
