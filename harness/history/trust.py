"""Which runners an archive trusts: the allow-list of runner keys kept with the archive.

``<archive>/.trusted-keys.json`` lists the public keys (``harness/attest.py``) whose signed runs
``lbench history add`` takes in and the gate may use as its baseline; each with a label (which
runner it is) and when it was trusted.  ``lbench history trust add KEY --label NAME`` adds one,
``trust remove KEY`` takes one off (runs it signed stay, and are untrusted from then on), ``trust
list`` shows them.  A run's trust is decided when it is read, never stored in the run: the catalog
keeps the key that signed each run (``signer``), and a reader joins it with this list.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from harness.errors import BadInput

TRUST_FILE = ".trusted-keys.json"
MAX_KEYS = 10_000


@dataclass(frozen=True)
class TrustedKey:
    key: str
    label: str
    added_at: str


def trust_path(archive: Path) -> Path:
    return Path(archive) / TRUST_FILE


def trusted_keys(archive: Path) -> dict[str, TrustedKey]:
    """The archive's allow-list (empty when it has none)."""
    from harness.attest import check_key_id
    from harness.untrusted import read_json

    path = trust_path(archive)
    if not (path.exists() or path.is_symlink()):
        return {}
    doc = read_json(path, what="archive's list of trusted runner keys", max_bytes=4 * 1024 * 1024, max_depth=4,
                    hint="the trust list must be a regular file inside the archive, never a link (whoever can change "
                         "the link's target would choose the trusted keys): replace it with a copy of the file you "
                         "mean, or remove it and trust the runners again (lbench history trust add KEY)")
    entries = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or len(entries) > MAX_KEYS or not all(isinstance(e, dict) for e in entries):
        raise BadInput("the archive's list of trusted runner keys is not one lbench wrote", where=str(path),
                       hint="fix or remove it, then trust the runners again: lbench history trust add KEY")
    out = {}
    for e in entries:
        k = check_key_id(str(e.get("key", "")), str(path))
        out[k] = TrustedKey(k, str(e.get("label", ""))[:200], str(e.get("added_at", ""))[:40])
    return out


def _save(archive: Path, keys: dict[str, TrustedKey]) -> None:
    from harness.atomic import atomic_write_json

    Path(archive).mkdir(parents=True, exist_ok=True)
    atomic_write_json(trust_path(archive), {"keys": [{"key": k.key, "label": k.label, "added_at": k.added_at}
                                                     for k in keys.values()]})


def trust_key(archive: Path, key: str, label: str) -> TrustedKey:
    from harness.attest import check_key_id

    k = check_key_id(key, "KEY")
    keys = trusted_keys(archive)
    entry = TrustedKey(k, label[:200], datetime.now(timezone.utc).isoformat(timespec="seconds"))
    keys[k] = entry
    _save(archive, keys)
    return entry


def untrust_key(archive: Path, key: str) -> TrustedKey:
    from harness.attest import check_key_id

    k = check_key_id(key, "KEY")
    keys = trusted_keys(archive)
    if k not in keys:
        raise BadInput(f"the archive does not trust key {k[:16]}…", where=str(trust_path(archive)),
                       hint="lbench history trust list shows the keys it trusts")
    entry = keys.pop(k)
    _save(archive, keys)
    return entry
