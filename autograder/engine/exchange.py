"""What nbgrader's exchange keeps beside a submitted notebook, carried beside the graded one.

``nbgrader collect`` puts ``timestamp.txt`` and ``submission_secret.txt`` beside each submission;
nbgrader's ``generate_feedback`` copies them from ``autograded/`` into ``feedback/``, and ``nbgrader
release_feedback`` needs both there: the secret keys the feedback page the student's ``nbgrader
fetch_feedback`` looks for. nbgrader's own autograde copies them; the engine writes ``autograded/``
itself, so it carries them too. Both files are the learner's (their ``nbgrader submit`` wrote them):
only regular files under a small bound are copied.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from autograder.engine.unzip import TIMESTAMP_FILE

#: The exchange's files that travel with a submission.
EXCHANGE_FILES = (TIMESTAMP_FILE, "submission_secret.txt")
#: The largest of them copied (nbgrader writes a time stamp and a 32-character secret).
MAX_EXCHANGE_FILE_BYTES = 1024


def carry(submitted: Path, timestamp: str, folder: Path) -> None:
    """Copy the exchange's files beside the notebook ``submitted`` into ``folder``; without a
    ``timestamp.txt`` there, write one from ``timestamp`` (ISO 8601, UTC) when it is known."""
    for name in EXCHANGE_FILES:
        data = _small_regular_file(submitted.parent / name)
        if data is not None:
            (folder / name).write_bytes(data)
    if not (folder / EXCHANGE_FILES[0]).exists() and timestamp:
        from nbgrader.utils import parse_utc

        text = parse_utc(timestamp).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
        (folder / EXCHANGE_FILES[0]).write_text(text, encoding="utf-8")


def _small_regular_file(path: Path) -> bytes | None:
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_EXCHANGE_FILE_BYTES:
            return None
        return path.read_bytes()
    except OSError:
        return None
