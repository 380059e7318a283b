"""Known idle samples with device sampling interleaved on/off (for the analysis and report tests)."""

import pandas as pd

PAUSES = [0.0, 1.0, 2.0, 3.0]


def interleaved(on_extra_ms: float, reps: int = 8) -> pd.DataFrame:
    """Known latencies: 10 ms after no pause, 50 ms after long ones, a small repeatable spread;
    repetitions alternate on/off; ``on_extra_ms`` added after long pauses when sampling is on."""
    rows = []
    for rep in range(reps):
        arm = "on" if rep % 2 == 0 else "off"
        for i, pause in enumerate(PAUSES):
            base = 10.0 if pause == 0 else 30.0 if pause == 1 else 50.0
            extra = on_extra_ms if arm == "on" and pause >= 2 else 0.0
            rows.append({"model": "tiny", "setting": "default", "phase": "measure", "error": None, "rep": rep,
                         "seq": rep * 4 + i, "pause_requested_s": pause, "latency_ms": base + extra + 0.1 * (rep % 3),
                         "device_sampling": arm, "server_prompt_ms": 1.0, "server_prompt_n": 1})
    return pd.DataFrame(rows)
