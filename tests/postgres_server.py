"""A private PostgreSQL server for the tests: a new cluster in a temporary folder, on a free loopback port
and a socket folder of its own, run as an unprivileged user (`postgres`, when the tests run as root:
the server refuses root), stopped at the end. Each test that asks gets a new, empty database on it.

Where `CHANGJI_TEST_DATABASE_URL` names a server already running (a URL whose user may create
databases), that server is used instead and nothing is started. With neither the server's programs
(Debian's `postgresql` package) nor that URL, the PostgreSQL half of the suite is skipped — unless
`CHANGJI_REQUIRE_POSTGRESQL=1` (set by `.ci/run`), which makes that a failure.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from tests.processes import free_port

ENV_URL = "CHANGJI_TEST_DATABASE_URL"
ENV_REQUIRED = "CHANGJI_REQUIRE_POSTGRESQL"
USER = "changji"  # the cluster's superuser (trust authentication on loopback and the socket only)


def programs() -> Path | None:
    """The folder of initdb/pg_ctl/postgres, the newest version installed (None: not installed)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).resolve().parent if pg_ctl else None


def create_database(server: str) -> tuple[str, str]:
    """A new empty database on the server at `server` (a URL of one of its databases): its name and URL."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')  # (a name of hex digits: nothing to quote)
    return name, urlunsplit(urlsplit(server)._replace(path=f"/{name}"))


class PrivateServer:
    """A throwaway cluster: `start()`, `new_database()` (its URL), `stop()`."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="changji-pg-"))
        self.port = free_port()
        self.bin = programs()
        self._as: list[str] = []
        self.started = False

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        if self.bin is None:
            raise FileNotFoundError("PostgreSQL's programs are not installed (Debian: apt-get install postgresql)")
        if os.geteuid() == 0:  # the server will not run as root: its files go to `postgres`
            account = pwd.getpwnam("postgres")
            os.chown(self.root, account.pw_uid, account.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        data, sockets = self.root / "data", self.root / "sockets"
        self._run("mkdir", str(sockets))
        self._run(
            str(self.bin / "initdb"), "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8",
            "--locale=C.UTF-8", "--no-sync",
        )  # fmt: skip
        options = (
            f"-p {self.port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off"
            " -c full_page_writes=off -c max_connections=400 -c shared_buffers=64MB"
        )
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(self.root / "log"), "-w", "start")
        self.started = True

    def new_database(self) -> str:
        """A new empty database on the server: its URL."""
        return create_database(self.url)[1]

    def stop(self) -> None:
        if self.started and self.bin is not None:
            with contextlib.suppress(subprocess.CalledProcessError):
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "stop")
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, *argv: str) -> None:
        subprocess.run([*self._as, *argv], check=True, capture_output=True, timeout=60)


class GivenServer:
    """A server named by `CHANGJI_TEST_DATABASE_URL`: new databases are made on it, and dropped at the end."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.made: list[str] = []

    def new_database(self) -> str:
        name, url = create_database(self.url)
        self.made.append(name)
        return url

    def stop(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            for name in self.made:
                conn.execute(f'drop database if exists "{name}" with (force)')
        self.made.clear()
