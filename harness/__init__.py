"""lbench: idle-wake and model-swap latency of local LLM servers."""

__version__ = "0.1.0"
