"""A real PostgreSQL server for the tests, started from the system's PostgreSQL (Debian's ``postgresql``
package, of whatever version the system has) in a temporary folder and stopped at the end
(``make test`` installs the package when it is missing: ``tests/system_deps.sh``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

#: Where Debian and Ubuntu put each version's server programs: ``<version>/bin`` (``PG_LIB`` moves it,
#: as it moves ``tests/system_deps.sh``'s search).
DEBIAN_LIB = Path(os.environ.get("PG_LIB", "/usr/lib/postgresql"))


def _version(text: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(part) for part in text.split("."))
    except ValueError:
        return None


def server_bin(lib: Path = DEBIAN_LIB) -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``: the newest version in Debian's layout, whichever the
    system's package installed, else the folder on PATH that has both; None when there is none."""
    found = [
        (version, folder)
        for folder in lib.glob("*/bin")
        if (version := _version(folder.parent.name)) is not None
        and all(os.access(folder / program, os.X_OK) for program in ("initdb", "pg_ctl"))
    ]
    if found:
        return max(found)[1]
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl and Path(initdb).parent == Path(pg_ctl).parent:
        return Path(initdb).parent
    return None


def available() -> bool:
    """Whether a PostgreSQL server's programs are installed."""
    return server_bin() is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run it as the ``postgres`` user then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return command


@contextlib.contextmanager
def server(folder: Path) -> Iterator[str]:
    """Run a PostgreSQL server with its data in ``folder``; yield the URL of its ``postgres`` database."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "data"
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
        folder.chmod(0o700)
        # the server user must be able to reach the folder through its parents
        for parent in folder.parents:
            if parent == Path("/") or parent.stat().st_mode & 0o001:
                continue
            parent.chmod(parent.stat().st_mode | 0o001)
    port = _free_port()
    bin_dir = server_bin()
    assert bin_dir is not None, "no PostgreSQL server is installed"
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    subprocess.run(
        _as_server_user(
            [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8"]
        ),
        check=True,
        capture_output=True,
        env=env,
    )
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run(
        _as_server_user(
            [
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(folder / "log"),
                "-w",
                "start",
            ]
        ),
        check=True,
        capture_output=True,
        env=env,
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            _as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
            env=env,
        )


def create_database(url: str, name: str) -> str:
    """Create an empty database on the server of ``url``; return its URL."""
    import psycopg

    with psycopg.connect(url.replace("postgresql://", "postgresql://", 1), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + f"/{name}"


def wait_ready(url: str, seconds: float = 10) -> None:
    """Wait until the server accepts connections."""
    import psycopg

    deadline = time.monotonic() + seconds
    while True:
        try:
            psycopg.connect(url).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
