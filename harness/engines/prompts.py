"""The text every engine is sent, one set for all of them: idle runs on llama-server, mlx_lm.server,
Ollama and OpenAI-compatible servers send the same prompt, so their figures describe the same work."""

IDLE_PROMPT = "Hello world, this is an idle wake probe."  # one-token requests of idle sweeps and calibration
SWAP_PROMPT = "Hello world, this is a swap probe."  # requests of swap storms and router claim scenarios
