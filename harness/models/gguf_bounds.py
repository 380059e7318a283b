"""Check a GGUF header's counts and sizes against the file before anything parses it.

``gguf.GGUFReader`` trusts the header: a 40-byte file claiming a u8 array of 2**40
elements makes it loop for seconds and allocate gigabytes.  ``check_header`` walks the
header (key/value section and tensor index) with every count, length and dimension
bounded by the bytes actually left in the file, so the work it does, and the work the
reader does after it, is linear in the file's size.  It raises ``HeaderError`` naming
the offending field and offset.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from typing import Any

MAGIC = b"GGUF"
MAX_KEY_BYTES = 1 << 16
MAX_DIMS = 8  # ggml has 4; leave room, refuse nonsense
MAX_NESTING = 3
MAX_ELEMENTS = 1 << 60
# GGUF value types -> fixed size in bytes (8 = string, 9 = array: variable)
FIXED_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9
MAX_TENSOR_TYPE = 255


class HeaderError(ValueError):
    pass


class _Cursor:
    def __init__(self, buf: mmap.mmap | bytes, size: int) -> None:
        self.buf, self.size, self.pos = buf, size, 0

    def left(self) -> int:
        return self.size - self.pos

    def need(self, n: int, what: str) -> None:
        if n < 0 or n > self.left():
            raise HeaderError(f"{what} at byte {self.pos} needs {n} bytes; the file has {self.left()} left")

    def unpack(self, fmt: str, what: str) -> Any:  # struct's value(s): an int, float or bool by ``fmt``
        n = struct.calcsize(fmt)
        self.need(n, what)
        value = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return value[0] if len(value) == 1 else value

    def string(self, what: str, limit: int | None = None) -> None:
        n = self.unpack("<Q", f"{what} length")
        if limit is not None and n > limit:
            raise HeaderError(f"{what} at byte {self.pos - 8} is {n} bytes long (limit {limit})")
        self.need(n, what)
        self.pos += n


def _value(cur: _Cursor, vtype: int, depth: int, what: str) -> None:
    if vtype in FIXED_SIZES:
        cur.need(FIXED_SIZES[vtype], what)
        cur.pos += FIXED_SIZES[vtype]
    elif vtype == STRING:
        cur.string(what)
    elif vtype == ARRAY:
        if depth >= MAX_NESTING:
            raise HeaderError(f"{what}: arrays nested deeper than {MAX_NESTING}")
        etype, count = cur.unpack("<IQ", f"{what} array header")
        if etype in FIXED_SIZES:
            cur.need(count * FIXED_SIZES[etype], f"{what} array of {count} items")
            cur.pos += count * FIXED_SIZES[etype]
        elif etype in (STRING, ARRAY):
            min_item = 8 if etype == STRING else 12
            cur.need(count * min_item, f"{what} array of {count} items")
            for _ in range(count):
                _value(cur, etype, depth + 1, what)
        else:
            raise HeaderError(f"{what}: unknown array element type {etype} at byte {cur.pos - 12}")
    else:
        raise HeaderError(f"{what}: unknown value type {vtype} at byte {cur.pos - 4}")


def check_header(path: str | os.PathLike[str]) -> None:
    """Raise ``HeaderError`` unless every count and size in the header fits the file."""
    p = Path(path)
    size = p.stat().st_size
    if size < 24:
        raise HeaderError(f"the file has {size} bytes; a GGUF header needs at least 24")
    with p.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        cur = _Cursor(buf, size)
        if buf[:4] != MAGIC:
            raise HeaderError(f"first bytes are {bytes(buf[:4])!r}, expected b'GGUF'")
        cur.pos = 4
        version = cur.unpack("<I", "version")
        if version not in (2, 3):
            raise HeaderError(f"GGUF version {version} (lbench reads versions 2 and 3)")
        n_tensors, n_kv = cur.unpack("<QQ", "counts")
        # every key/value takes at least 8 (key length) + 4 (type) + 1 bytes, every tensor 8 + 4 + 4 + 8
        if n_kv * 13 > cur.left():
            raise HeaderError(f"header claims {n_kv} key/value pairs; {cur.left()} bytes cannot hold them")
        if n_tensors * 24 > cur.left():
            raise HeaderError(f"header claims {n_tensors} tensors; {cur.left()} bytes cannot hold them")
        for i in range(n_kv):
            cur.string(f"key {i}", MAX_KEY_BYTES)
            vtype = cur.unpack("<I", f"key {i} type")
            _value(cur, vtype, 0, f"key {i} value")
        for i in range(n_tensors):
            cur.string(f"tensor {i} name", MAX_KEY_BYTES)
            n_dims = cur.unpack("<I", f"tensor {i} dimension count")
            if n_dims > MAX_DIMS:
                raise HeaderError(f"tensor {i} claims {n_dims} dimensions (at most {MAX_DIMS})")
            elements = 1
            for d in range(n_dims):
                dim = cur.unpack("<Q", f"tensor {i} dimension {d}")
                elements *= max(dim, 1)
                if elements > MAX_ELEMENTS:
                    raise HeaderError(f"tensor {i} claims more than 2**60 elements")
            ttype, offset = cur.unpack("<IQ", f"tensor {i} type and offset")
            if ttype > MAX_TENSOR_TYPE:
                raise HeaderError(f"tensor {i} has unknown type {ttype}")
            if offset > size:
                raise HeaderError(f"tensor {i} data offset {offset} is past the end of the file ({size} bytes)")
