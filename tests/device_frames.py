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


def rewire(wired_gb: float = 8.0, drop_after_s: float = 1.0, reps: int = 6) -> pd.DataFrame:
    """A re-wire on known data: wired memory (an apple-probe column) holds ``wired_gb`` and falls by
    half once a pause passes ``drop_after_s``; a process probe's resident set stays flat beside it."""
    rows, seq = [], 0
    for rep in range(reps):
        for pause in (0.5, 3.0):
            for t in (0.1, 0.6, 1.1, 1.6, 2.1, 2.6):
                if t > pause - 0.25:
                    break
                wired = wired_gb * 2**30 * (0.5 if t > drop_after_s else 1.0) + rep * 2**20
                rows.append({"model": "m", "setting": "none", "rep": rep, "seq": seq, "pause_requested_s": pause,
                             "probe": "apple", "device": "apple-gpu", "t_since_pause_start_s": t,
                             "left_alone": False, "wired_bytes": wired, "process_mem_bytes": None})
                rows.append({"model": "m", "setting": "none", "rep": rep, "seq": seq, "pause_requested_s": pause,
                             "probe": "process", "device": "cpu", "t_since_pause_start_s": t,
                             "left_alone": False, "wired_bytes": None, "process_mem_bytes": 100 * 2**20})
            seq += 1
    return pd.DataFrame(rows)

