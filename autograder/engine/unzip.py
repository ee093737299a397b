"""Extract an untrusted zip archive: regular files only, bounded while streaming, under names we choose.

Every entry of the archive ends as an :class:`Entry` (its bytes on disk, or none needed) or as a
rejection with the reason; nothing an entry holds or is named can stop the others:

* the archive as a whole: at most :data:`MAX_ZIP_FILES` entries, declaring at most
  :data:`MAX_ZIP_BYTES` in all;
* an entry's name is only ever a name: it is kept (as :attr:`Entry.parts`) for the layout and the
  student's identity, and the bytes go to a numbered file, so that no name (``..``, absolute, 300
  bytes long, not UTF-8, one that differs from another only in case) reaches the file system; a name
  that climbs out of the archive's folder is still refused, as ``unzip`` would write it elsewhere;
* an entry flagged as UTF-8 whose name is not UTF-8 (Python's ``zipfile`` cannot open such an archive
  at all) is refused alone: the archive is read again with the flag cleared on those names;
* an entry's bytes are checked against its declared size before they are read, and against the
  actual inflated size while they are copied to disk in chunks of :data:`CHUNK` bytes: a small entry
  that inflates to gigabytes is refused at :data:`MAX_ENTRY_BYTES`, holding one chunk;
* only notebooks and nbgrader's ``timestamp.txt`` are extracted (the rest are accounted for by name).
"""

from __future__ import annotations

import datetime as dt
import io
import stat
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from autograder.engine.notebook_file import MAX_NOTEBOOK_BYTES

MAX_ZIP_BYTES = 2 * 1024**3
MAX_ZIP_FILES = 20_000
#: The largest entry extracted (a notebook is refused above :data:`MAX_NOTEBOOK_BYTES` anyway).
MAX_ENTRY_BYTES = MAX_NOTEBOOK_BYTES
#: The largest ``timestamp.txt`` read.
MAX_TIMESTAMP_BYTES = 4096
CHUNK = 1024**2

#: nbgrader's submission time file: extracted, like notebooks.
TIMESTAMP_FILE = "timestamp.txt"

_UTF8_FLAG = 0x800


@dataclass(frozen=True)
class Entry:
    """One regular file of the archive."""

    parts: tuple[str, ...]
    """Its path in the archive, split at ``/``."""
    origin: str
    """``archive.zip:path/in/archive``, as the instructor sees it."""
    path: Path | None
    """Where its bytes were extracted, or None for a file that is neither a notebook nor a time stamp."""
    timestamp: str = ""
    """The entry's time in the archive (ISO 8601), or empty."""


@dataclass(frozen=True)
class Refused:
    """An entry (or the whole archive) that was not extracted, and why."""

    origin: str
    reason: str


def _wanted(name: str) -> bool:
    return name.endswith(".ipynb") or name == TIMESTAMP_FILE


def _zip_time(m: zipfile.ZipInfo) -> str:
    try:
        return dt.datetime(*m.date_time).isoformat()
    except ValueError:
        return ""


class _MaskedFlags(io.FileIO):
    """The archive's file, read with the UTF-8 flag cleared on central directory entries whose names
    are not UTF-8, so that ``zipfile`` lists them (under a cp437 name) instead of failing on all; the
    raw names it cleared are in :attr:`masked`."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, "r")
        self.masked: set[bytes] = set()

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        if not data.startswith(b"PK\x01\x02"):
            return data
        out = bytearray(data)
        i = 0
        while out[i : i + 4] == b"PK\x01\x02" and i + 46 <= len(out):
            (flags,) = struct.unpack_from("<H", out, i + 8)
            n, m, k = struct.unpack_from("<HHH", out, i + 28)
            name = bytes(out[i + 46 : i + 46 + n])
            if flags & _UTF8_FLAG and not _is_utf8(name):
                struct.pack_into("<H", out, i + 8, flags & ~_UTF8_FLAG)
                self.masked.add(name)
            i += 46 + n + m + k
        return bytes(out)


def _is_utf8(name: bytes) -> bool:
    try:
        name.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _open(archive: Path) -> tuple[zipfile.ZipFile, set[bytes], _MaskedFlags | None]:
    """The archive opened by ``zipfile``, the raw names flagged UTF-8 that are not, and the file to
    close afterwards when it had to be read through :class:`_MaskedFlags`."""
    try:
        return zipfile.ZipFile(archive), set(), None
    except UnicodeDecodeError:
        raw = _MaskedFlags(archive)
        try:
            return zipfile.ZipFile(raw), raw.masked, raw
        except BaseException:
            raw.close()
            raise


def extract(archive: Path, folder: Path) -> tuple[list[Entry], list[Refused]]:
    """Extract ``archive`` into ``folder`` (made if missing) as described in the module's docstring."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        zf, masked, raw = _open(archive)
    except Exception as exc:  # noqa: BLE001 - any archive zipfile cannot open is this archive's outcome
        return [], [Refused(archive.name, f"not a readable zip archive ({exc})")]
    try:
        with zf:
            return _extract_all(zf, archive.name, folder, masked)
    finally:
        if raw is not None:
            raw.close()


def _extract_all(
    zf: zipfile.ZipFile, name: str, folder: Path, masked: set[bytes]
) -> tuple[list[Entry], list[Refused]]:
    entries: list[Entry] = []
    refused: list[Refused] = []
    members = [m for m in zf.infolist() if not m.is_dir()]
    if len(members) > MAX_ZIP_FILES or sum(m.file_size for m in members) > MAX_ZIP_BYTES:
        return [], [Refused(name, "zip archive too large to extract safely")]
    written = 0
    for index, m in enumerate(members):
        raw_name = m.orig_filename.encode("cp437", "replace") if not m.flag_bits & _UTF8_FLAG else b""
        if raw_name in masked:
            shown = raw_name.decode("utf-8", "backslashreplace")
            why = "its name in the zip archive is flagged as UTF-8 but is not UTF-8"
            refused.append(Refused(f"{name}:{shown}", why))
            continue
        origin = f"{name}:{m.filename}"
        try:
            outcome = _entry(zf, m, origin, folder, index, MAX_ZIP_BYTES - written)
        except Exception as exc:  # noqa: BLE001 - one entry's failure is that entry's outcome
            outcome = Refused(origin, f"not readable from the zip archive ({type(exc).__name__}: {exc})")
        if isinstance(outcome, Entry):
            entries.append(outcome)
            written += outcome.path.stat().st_size if outcome.path else 0
        else:
            refused.append(outcome)
    return entries, refused


def _unsafe(name: str) -> bool:
    path = PurePosixPath(name.replace("\\", "/"))
    drive = len(name) > 1 and name[1] == ":" and name[0].isalpha()
    return path.is_absolute() or ".." in path.parts or drive


def _entry(
    zf: zipfile.ZipFile, m: zipfile.ZipInfo, origin: str, folder: Path, index: int, room: int
) -> Entry | Refused:
    """One entry, extracted to ``folder`` under its number when it is wanted, or refused with the reason."""
    if _unsafe(m.filename):
        return Refused(origin, "unsafe path in zip archive")
    mode = m.external_attr >> 16
    if stat.S_ISLNK(mode):
        return Refused(origin, "a symbolic link in the zip archive, not a regular file")
    if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
        return Refused(origin, "not a regular file in the zip archive")
    parts = tuple(p for p in m.filename.split("/") if p not in ("", "."))
    if not parts:
        return Refused(origin, "unsafe path in zip archive")
    if not _wanted(parts[-1]):
        return Entry(parts, origin, None, _zip_time(m))
    if m.flag_bits & 0x1:
        return Refused(origin, "not readable from the zip archive (it is encrypted)")
    target = folder / f"{index:05d}{'.txt' if parts[-1] == TIMESTAMP_FILE else '.ipynb'}"
    limit = min(MAX_TIMESTAMP_BYTES if parts[-1] == TIMESTAMP_FILE else MAX_ENTRY_BYTES, room)
    if m.file_size > limit:
        return Refused(origin, f"declares {m.file_size} bytes, over the {limit} byte limit of an entry")
    try:
        copied = _copy(zf, m, target, limit)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        target.unlink(missing_ok=True)
        return Refused(origin, f"not readable from the zip archive ({exc})")
    if copied is None:
        target.unlink(missing_ok=True)
        return Refused(
            origin, f"inflates to more than {limit} bytes (it declares {m.file_size}): not extracted"
        )
    return Entry(parts, origin, target, _zip_time(m))


def _copy(zf: zipfile.ZipFile, m: zipfile.ZipInfo, target: Path, limit: int) -> int | None:
    """Copy an entry's bytes to ``target`` a chunk at a time; None (and stop) past ``limit`` bytes."""
    total = 0
    with zf.open(m) as src, target.open("wb") as out:
        while chunk := src.read(CHUNK):
            total += len(chunk)
            if total > limit:
                return None
            out.write(chunk)
    return total
