"""`make test` finds or installs what its tests need besides Python packages (``tests/system_deps.sh``):
Debian's chromium and a PostgreSQL server of whatever version the system has, found the same way by
the script and by ``tests/postgres.py``; what it cannot install, it names in one line with the reason."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import postgres

SCRIPT = Path(__file__).parent / "system_deps.sh"
#: Where this machine's libatomic is, as the script looks for it (its first multiarch folder holding it).
ATOMIC = next(
    str(path)
    for folder in ("/lib", "/usr/lib")
    for path in sorted(Path(folder).glob("*-linux-gnu/libatomic.so.1"))
)


def _deps(**env: str) -> list[str]:
    done = subprocess.run(
        [str(SCRIPT)], env={**os.environ, **env}, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.splitlines()


def _fake_postgres(lib: Path, version: str, programs=("initdb", "pg_ctl")) -> Path:
    folder = lib / version / "bin"
    folder.mkdir(parents=True)
    for program in programs:
        (folder / program).write_text("#!/bin/sh\n")
        (folder / program).chmod(0o755)
    return folder


def test_postgres_is_found_whatever_its_version(tmp_path: Path) -> None:
    """Debian installs each version under /usr/lib/postgresql/<version>/bin: the newest complete one wins,
    in the tests and in the script alike."""
    lib = tmp_path / "postgresql"
    for version in ("9.6", "15", "17"):
        _fake_postgres(lib, version)
    _fake_postgres(lib, "18", programs=("initdb",))  # no pg_ctl: not a server
    (lib / "common" / "bin").mkdir(parents=True)
    assert postgres.server_bin(lib) == lib / "17" / "bin"
    lines = _deps(PG_LIB=str(lib))
    assert lines == [
        f"system packages: chromium at /usr/bin/chromium, PostgreSQL server programs in {lib}/17/bin, "
        f"{ATOMIC} for Playwright's driver"
    ]


def test_the_script_and_the_tests_find_this_machines_server() -> None:
    found = postgres.server_bin()
    assert found is not None, "no PostgreSQL server: run `make system-deps`"
    assert _deps() == [
        f"system packages: chromium at /usr/bin/chromium, PostgreSQL server programs in {found}, "
        f"{ATOMIC} for Playwright's driver"
    ]


def test_a_dry_run_says_in_one_line_what_it_would_install(tmp_path: Path) -> None:
    missing = {"CHROMIUM": str(tmp_path / "chromium"), "PG_LIB": str(tmp_path / "none"), "DRY_RUN": "1"}
    lines = _deps(**missing, PATH="/usr/bin:/bin")
    assert len(lines) == 1, lines
    if os.geteuid() == 0:
        assert lines[0] == (
            "system packages: would install chromium postgresql: apt-get update && "
            "apt-get install -y chromium postgresql"
        )
    else:
        assert "chromium postgresql" in lines[0] and "install" in lines[0]


def test_a_system_without_libatomic_gets_it_installed(tmp_path: Path) -> None:
    """Found on a minimal Debian (a root made by debootstrap): Playwright's driver, a Node.js binary,
    needs libatomic.so.1, and without it every browser test failed before the browser started."""
    lines = _deps(LIB_DIRS=str(tmp_path), DRY_RUN="1", PATH="/usr/bin:/bin")
    if os.geteuid() == 0:
        assert lines == [
            "system packages: would install libatomic1: apt-get update && apt-get install -y libatomic1"
        ]
    else:
        assert len(lines) == 1 and "libatomic1" in lines[0], lines


def test_playwrights_driver_runs_here() -> None:
    """What libatomic is for: the driver that Playwright starts before any browser loads its libraries."""
    import playwright

    node = Path(playwright.__file__).parent / "driver" / "node"
    done = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_without_apt_get_it_says_why_and_the_suite_still_runs(tmp_path: Path) -> None:
    """A system without apt-get (another distribution): one line, exit status 0, nothing installed."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("ls", "sort", "tail", "dirname", "id", "bash"):
        (tools / tool).symlink_to(shutil.which(tool))
    lines = _deps(CHROMIUM=str(tmp_path / "chromium"), PG_LIB=str(tmp_path / "none"), PATH=str(tools))
    assert lines == [
        "system packages: cannot install chromium postgresql: this system has no apt-get; install them with "
        "its package manager; the tests that need them will fail."
    ]
