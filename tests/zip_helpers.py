"""Zip archives built byte by byte, for what ``zipfile`` will not write: a name flagged UTF-8 that is not
UTF-8, an entry whose deflated bytes inflate to gigabytes, a declared size that lies."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

UTF8_FLAG = 0x800


@dataclass
class RawEntry:
    """One entry: its name's bytes, its stored (deflated) bytes, and what its headers declare."""

    name: bytes
    data: bytes
    crc: int
    size: int
    """The uncompressed size the headers declare."""
    flags: int = 0


def deflated(content: bytes) -> RawEntry:
    """An honest entry (name set later) holding ``content``, deflated."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return RawEntry(b"", c.compress(content) + c.flush(), zlib.crc32(content), len(content))


def zeros_bomb(megabytes: int) -> RawEntry:
    """An entry of ``megabytes`` MiB of zeros whose deflated bytes take about a thousandth of that: one
    deflated MiB, flushed so it stands alone, repeated (fast to build, unlike deflating it all)."""
    block = b"\0" * 1024**2
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    one = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    end = c.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(megabytes):
        crc = zlib.crc32(block, crc)
    return RawEntry(b"", one * megabytes + end, crc, megabytes * 1024**2)


def write_zip(path: Path, entries: list[RawEntry]) -> Path:
    """A zip archive of ``entries``, deflated, headers as declared (no zip64: sizes under 4 GiB)."""
    local, central = bytearray(), bytearray()
    for e in entries:
        offset = len(local)
        fields = (20, e.flags, 8, 0, 0x21, e.crc, len(e.data), e.size, len(e.name), 0)
        local += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", *fields) + e.name + e.data
        central += (
            struct.pack(
                "<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 0x031E, *fields, 0, 0, 0, 0o100644 << 16, offset
            )
            + e.name
        )
    end = struct.pack(
        "<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(central), len(local), 0
    )
    path.write_bytes(bytes(local + central + end))
    return path
