"""Copy measured runs into a large results folder in the real on-disk format (a benchmark's input).

    python scripts/make_run_archive.py RUN_DIR [RUN_DIR ...] --out /tmp/archive --count 5000

Each copy gets a new run id (its time shifted by one second per copy, the same kind and a fresh
suffix) written into its manifest and journal rows; files are hard-linked where the id does not
appear (Parquet tables keep the source's id column: listings read manifests and counts only).
Used for the listing benchmark in docs/results.md; not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path


def copy_run(src: Path, out: Path, when: datetime, n: int) -> Path:
    manifest = json.loads((src / "manifest.json").read_text())
    run_id = f"{when:%Y%m%dT%H%M%SZ}-{manifest['kind']}-{n % 65536:04x}"
    dest = out / run_id
    dest.mkdir(parents=True)
    for path in src.rglob("*"):
        rel = path.relative_to(src)
        target = dest / rel
        if path.is_dir():
            target.mkdir(exist_ok=True)
        elif rel.name == "manifest.json":
            start, end = (datetime.fromisoformat(manifest[k]) if manifest.get(k) else None
                          for k in ("started_at", "ended_at"))
            manifest.update(run_id=run_id, started_at=when.isoformat(timespec="milliseconds"),
                            ended_at=(when + (end - start)).isoformat(timespec="milliseconds")
                            if start and end else None)
            target.write_text(json.dumps(manifest, indent=2))
        elif rel.name.endswith(".jsonl"):
            target.write_text("".join(json.dumps({**json.loads(line), "run_id": run_id}) + "\n"
                                      for line in path.read_text().splitlines() if line.strip()))
        else:
            try:
                os.link(path, target)
            except OSError:
                shutil.copy2(path, target)
    return dest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--count", type=int, default=5000)
    args = parser.parse_args()
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i in range(args.count):
        copy_run(args.runs[i % len(args.runs)], args.out, start + timedelta(seconds=i), i)
    print(f"{args.count} runs in {args.out}")


if __name__ == "__main__":
    main()
