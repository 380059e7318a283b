"""Runs signed by the runner that made them: where a run in a shared history came from.

A runner (a machine that makes runs) holds an Ed25519 key in its lbench config directory
(``$LBENCH_RUNNER_KEY``, else ``$XDG_CONFIG_HOME/lbench/runner-key.pem``, else
``~/.config/lbench/runner-key.pem``; created with mode 0600 the first time a run is signed).  When
a run ends, ``sign_run`` writes ``signature.json`` into the run directory: the sha256 of every
regular file of the run (manifest, journals, Parquet tables, logs, ``analysis.json``) and an
Ed25519 signature over that list, with the public key that made it.

``verify_run`` checks a run directory against its signature: the signature is the key's, every
signed file is there with the same sha256.  Files the signature does not cover (a report rendered
later, a file put there by hand) and derived files that changed since (``analysis.json``) are named
so that the caller leaves them out.  Which keys are trusted is not this module's business: the
history archive keeps an allow-list (``harness/history/trust.py``).

What a signature does not prove: that the measurements are honest (whoever holds a trusted key can
sign anything), nor anything once the key has leaked (docs/history.md, "Who can add runs").
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import paths
from harness.errors import BadInput

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from harness.untrusted import MAX_JSON_BYTES, MAX_TABLE_BYTES, open_regular, read_json

SIGNATURE_FILE = "signature.json"
FORMAT = "lbench-run-signature/1"
DERIVED = frozenset({"analysis.json", "report.html"})  # recomputed from the rest: left out when they changed
MAX_SIGNED_FILES = 10_000
MAX_DEPTH = 8
KEY_ID_LEN = 64  # hex of the 32-byte Ed25519 public key


def key_path() -> Path:
    explicit = os.environ.get("LBENCH_RUNNER_KEY")
    if explicit:
        return Path(explicit).expanduser()
    return paths.config_dir() / "runner-key.pem"


KEY_HINT = ("keep the runner key a regular file of yours, mode 0600, in a folder only you (or root) can write: "
            "chmod 600 KEY; chmod go-w FOLDER (or move it away and let lbench make a new one, then trust that)")


def check_key_folders(path: Path) -> None:
    """Refuse a key whose folders another user could write (as ssh does for its keys): each folder
    from the key's up to ``/`` must be owned by this user or root and not writable by group or
    others, unless it is sticky (``/tmp``: nobody may replace another's entry there)."""
    if sys.platform == "win32":  # no POSIX owners or modes
        return
    me = os.getuid()
    folder = Path(os.path.abspath(path)).parent
    for d in [folder, *folder.parents]:
        try:
            st = os.stat(d)
        except OSError:
            continue  # not made yet: made below with mode 0700
        if st.st_uid not in (me, 0):
            raise BadInput(f"the runner key's folder {d} is owned by another user (uid {st.st_uid}), who could "
                           "replace the key", where=str(path), hint=KEY_HINT)
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise BadInput(f"the runner key's folder {d} is writable by others (mode {stat.S_IMODE(st.st_mode):04o}, "
                           "not sticky): anyone could replace the key", where=str(path), hint=KEY_HINT)


def check_key_file(path: Path, st: os.stat_result) -> None:
    """Refuse a key file another user owns or can read or write (ssh: "UNPROTECTED PRIVATE KEY FILE")."""
    if sys.platform == "win32":
        return
    if st.st_uid != os.getuid():
        raise BadInput(f"the runner key is owned by another user (uid {st.st_uid}), not you (uid {os.getuid()})",
                       where=str(path), hint=KEY_HINT)
    if st.st_mode & 0o077:
        raise BadInput(f"the runner key is readable or writable by others (mode {stat.S_IMODE(st.st_mode):04o}): "
                       "anyone who read it can sign runs as this runner", where=str(path),
                       hint=f"chmod 600 {path}, and if others may have read it, move it away, let lbench make a new "
                            "one, trust the new key and remove the old one (lbench history trust remove OLD)")


def _load_private(path: Path) -> Ed25519PrivateKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    check_key_folders(path)
    fd, _ = open_regular(path, max_bytes=16 * 1024, what="runner key", hint=KEY_HINT)
    with os.fdopen(fd, "rb") as fh:
        check_key_file(path, os.fstat(fh.fileno()))
        data = fh.read()
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise BadInput(f"the runner key is not a PEM private key ({exc})", where=str(path),
                       hint="move it away; lbench makes a new one (then trust the new key in the archives)") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise BadInput("the runner key is not an Ed25519 key", where=str(path),
                       hint="move it away; lbench makes a new Ed25519 key")
    return key


def runner_key(create: bool = True) -> Ed25519PrivateKey:
    """This runner's private key; made (mode 0600, exclusive create) when missing and ``create``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = key_path()
    if path.exists() or path.is_symlink():
        return _load_private(path)
    if not create:
        raise BadInput("this runner has no key yet", where=str(path), hint="lbench history key makes one")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    check_key_folders(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:  # another lbench made it first
        return _load_private(path)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    return key


def key_id(private_or_public: Any) -> str:
    """The public key as 64 hex digits: what an archive's allow-list holds."""
    from cryptography.hazmat.primitives import serialization

    public = private_or_public.public_key() if hasattr(private_or_public, "public_key") else private_or_public
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()


def check_key_id(text: str, where: str) -> str:
    k = str(text).strip().lower()
    if len(k) != KEY_ID_LEN or any(c not in "0123456789abcdef" for c in k):
        raise BadInput(f"{str(text)[:80]!r} is not a runner key (64 hex digits)", where=where,
                       hint="print a runner's key on that runner with: lbench history key")
    return k


def _sha256_file(path: Path) -> str:
    fd, _ = open_regular(path, max_bytes=MAX_TABLE_BYTES, what=f"file {path.name}")
    h = hashlib.sha256()
    with os.fdopen(fd, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def regular_files(run_dir: Path) -> dict[str, Path]:
    """Every regular file below ``run_dir`` by its relative POSIX path (links and special files
    are not files of the run), bounded in depth and count."""
    found: dict[str, Path] = {}
    stack: list[tuple[Path, str, int]] = [(Path(run_dir), "", 0)]
    while stack:
        d, prefix, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BadInput(f"the run nests folders deeper than {MAX_DEPTH} levels", where=str(d),
                           hint="this is not a folder lbench wrote; copy the run again")
        with os.scandir(d) as entries:
            for e in entries:
                st = e.stat(follow_symlinks=False)
                rel = f"{prefix}{e.name}"
                if stat.S_ISDIR(st.st_mode):
                    stack.append((Path(e.path), rel + "/", depth + 1))
                elif stat.S_ISREG(st.st_mode):
                    found[rel] = Path(e.path)
                    if len(found) > MAX_SIGNED_FILES:
                        raise BadInput(f"the run holds more than {MAX_SIGNED_FILES:,} files", where=str(run_dir),
                                       hint="this is not a folder lbench wrote")
    return found


def _payload(key: str, files: dict[str, str]) -> bytes:
    return json.dumps({"format": FORMAT, "key": key, "files": dict(sorted(files.items()))},
                      sort_keys=True, separators=(",", ":")).encode()


def sign_run(run_dir: Path, key: Ed25519PrivateKey | None = None) -> Path:
    """Write ``signature.json`` into ``run_dir``: every regular file's sha256, signed."""
    from harness.atomic import atomic_write_text

    key = key if key is not None else runner_key()
    kid = key_id(key)
    files = {rel: _sha256_file(p) for rel, p in regular_files(run_dir).items()
             if rel != SIGNATURE_FILE and rel != "report.html" and not Path(rel).name.startswith(".")}
    sig = key.sign(_payload(kid, files)).hex()
    doc = {"format": FORMAT, "key": kid, "files": dict(sorted(files.items())), "signature": sig}
    return atomic_write_text(Path(run_dir) / SIGNATURE_FILE, json.dumps(doc, indent=1))


@dataclass(frozen=True)
class Verified:
    key: str  # the signer's public key (hex)
    files: tuple[str, ...]  # the signed files found unchanged (relative paths)
    left_out: tuple[str, ...] = field(default=())  # present but not covered, or derived and changed


def _bad(what: str, where: Path) -> BadInput:
    return BadInput(what, where=str(where), hint="the run was changed after it was signed, or was not made by a "
                                                 "runner; add the run as its runner wrote it")


def verify_run(run_dir: Path) -> Verified | None:
    """The run's signature checked against its files; None when the run carries none.  A signature
    that does not verify, or a signed file missing or changed, is ``BadInput``."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    run_dir = Path(run_dir)
    path = run_dir / SIGNATURE_FILE
    if not (path.exists() or path.is_symlink()):
        return None
    doc = read_json(path, what="run's signature", max_bytes=MAX_JSON_BYTES, max_depth=4)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("files"), dict) \
            or not isinstance(doc.get("signature"), str) or not isinstance(doc.get("key"), str):
        raise _bad(f"the run's signature is not an {FORMAT} document", path)
    kid = check_key_id(doc["key"], str(path))
    files = doc["files"]
    if len(files) > MAX_SIGNED_FILES or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise _bad("the run's signature lists files lbench does not write", path)
    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(kid)).verify(bytes.fromhex(doc["signature"]),
                                                                     _payload(kid, files))
    except (InvalidSignature, ValueError):
        raise _bad("the run's signature does not verify (its file list or signature was changed)", path) from None
    present = regular_files(run_dir)
    good, left_out = [], []
    for rel, digest in files.items():
        if rel not in present:
            if Path(rel).name in DERIVED:
                continue
            raise _bad(f"the signed file {rel[:100]} is missing", run_dir)
        if _sha256_file(present[rel]) != digest:
            if Path(rel).name in DERIVED and "/" not in rel:
                left_out.append(rel)
                continue
            raise _bad(f"the signed file {rel[:100]} was changed after the run was signed", run_dir / rel)
        good.append(rel)
    left_out += sorted(rel for rel in present if rel not in files and rel != SIGNATURE_FILE)
    return Verified(kid, tuple(sorted(good)), tuple(left_out))
