"""An environment in which an installed library reports another version, for the tests of what a resident
service or a Dask worker with other libraries than the grading command is refused."""

from __future__ import annotations

import os
from pathlib import Path

#: The library whose version the environment changes: one that no library here checks the version of.
LIBRARY = "pyzmq"
OTHER_VERSION = "0.0.1"


def other_library_env(folder: Path, version: str = OTHER_VERSION) -> dict[str, str]:
    """Environment variables under which :data:`LIBRARY` is installed as ``version``: its metadata, as
    pip writes it, in a folder first on ``PYTHONPATH`` (what the process imports is unchanged; what its
    metadata says, and so what the process reports, is the other version)."""
    info = folder / "other-libraries" / f"{LIBRARY}-0.0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {LIBRARY}\nVersion: {version}\n")
    path = [str(info.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(path)}
