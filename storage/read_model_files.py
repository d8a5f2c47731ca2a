"""Which file holds the read models, and how a rebuilt one takes over — also under a running service.

The read models live in `read_models.sqlite` until a rebuild makes a new file beside it
(`read_models-<time>.sqlite`, never a file in use: SQLite's log and shared-memory files belong to the
database they were made for, so a file is never replaced under its own name). The name of the file in
use is then kept in `read_models.current`. A rebuilt file waits in `read_models.next` for a serving
process to adopt it (it holds `serve.lock` while it runs); with no service running, the rebuild
promotes it itself. Pointers are written whole or not at all (a temporary file, then a rename).
Files no pointer names are removed when a file is promoted and when a service starts — but never
one a rebuild is still writing, offering or promoting (it holds a lock on `<file>.building` until it
is named). One process serves a data dir at a time (`changji serve`, or `changji demo --data-dir`);
a test or a benchmark that builds a service itself takes no lock and should not run beside a
rebuild of its data dir.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

DEFAULT = "read_models.sqlite"
CURRENT, NEXT, LOCK = "read_models.current", "read_models.next", "serve.lock"
IN_USE = ".inuse"
SUFFIXES = ("", "-wal", "-shm", "-journal", IN_USE)


def current(data_dir: Path) -> Path:
    """The read-model file in use."""
    named = _read(data_dir / CURRENT)
    return data_dir / (named or DEFAULT)


def waiting(data_dir: Path) -> Path | None:
    """A rebuilt file waiting to be adopted, if any (and it exists)."""
    named = _read(data_dir / NEXT)
    return data_dir / named if named and (data_dir / named).exists() else None


def new_file(data_dir: Path) -> Path:
    """A fresh name for a rebuild, reserved: its `.building` marker is made (exclusively) here, so two
    rebuilds never share a name; names sort by the time they were made."""
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{int(now % 1 * 1_000_000):06d}"
    for n in range(1000):
        path = data_dir / f"read_models-{stamp}-{os.getpid()}-{n:03d}.sqlite"
        if any(Path(f"{path}{suffix}").exists() for suffix in SUFFIXES):
            continue
        try:
            os.close(os.open(f"{path}.building", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        return path
    raise RuntimeError("no free name for a rebuilt read-model file")


def offer(data_dir: Path, path: Path) -> None:
    """Leave a rebuilt file for the running service to adopt."""
    _write(data_dir / NEXT, path.name)


def promote(data_dir: Path, path: Path) -> None:
    """Make `path` the file in use, withdraw any offer (an older rebuild's too: this one is newer),
    then remove the files nobody names."""
    if not path.exists():
        raise FileNotFoundError(f"no read-model file at {path}")
    _write(data_dir / CURRENT, path.name)
    withdraw(data_dir, path)
    remove_unused(data_dir)


def withdraw(data_dir: Path, upto: Path) -> None:
    """Forget the file on offer if it is `upto` or older (adopted, promoted over, or refused); a newer
    offer stays."""
    named = _read(data_dir / NEXT)
    if named is not None and named <= upto.name:
        with contextlib.suppress(FileNotFoundError):
            (data_dir / NEXT).unlink()


@contextlib.contextmanager
def building(path: Path) -> Iterator[None]:
    """Held while a rebuild writes `path`: `remove_unused` leaves a file under construction alone."""
    marker = Path(f"{path}.building")
    with marker.open("a") as handle:
        if not _try_lock(handle):
            raise RuntimeError(f"another rebuild is writing {path}")
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    with contextlib.suppress(FileNotFoundError):
        marker.unlink()


def _under_construction(path: Path) -> bool:
    marker = Path(f"{path}.building")
    if not marker.exists():
        return False
    if _locked(marker):
        return True
    with contextlib.suppress(FileNotFoundError):
        marker.unlink()  # left by a rebuild that died: its file goes too
    return False


def _locked(marker: Path) -> bool:
    """Whether a process holds a lock on the marker (it is looked at, not held)."""
    with marker.open("a") as handle:
        if not _try_lock(handle):
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


class Held:
    """A shared lock on `<file>.inuse`, held while a process has the read-model file open (let go with
    `let_go`, or when the holder is collected): the processes of one service switch to a rebuilt file
    one after the other, and the old one is removed only once none of them holds it."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._fd: int | None = os.open(f"{path}{IN_USE}", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_SH)

    def let_go(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # (which lets go of the lock)
            self._fd = None

    def __del__(self) -> None:
        self.let_go()


def hold_current(data_dir: Path) -> tuple[Path, Held]:
    """The read-model file in use, held (`Held`) before it is opened, so no promotion elsewhere removes it
    in between; a file promoted over while it was being held is let go, and the new one held instead."""
    while True:
        path = current(data_dir)
        handle = Held(path)
        if current(data_dir) == path:
            return path, handle
        handle.let_go()
        if not path.exists():  # (removed meanwhile: its marker too)
            with contextlib.suppress(FileNotFoundError):
                Path(f"{path}{IN_USE}").unlink()


def _in_use(path: Path) -> bool:
    marker = Path(f"{path}{IN_USE}")
    return marker.exists() and _locked(marker)


def remove_unused(data_dir: Path) -> list[Path]:
    """Remove read-model files no pointer names (what a promotion left behind) and no process still
    holds; return them."""
    keep = {current(data_dir).name}
    offered = waiting(data_dir)
    if offered is not None:
        keep.add(offered.name)
    gone = []
    for path in [data_dir / DEFAULT, *data_dir.glob("read_models-*.sqlite")]:
        if path.name in keep or not path.exists() or _under_construction(path) or _in_use(path):
            continue
        for suffix in SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                Path(f"{path}{suffix}").unlink()
        gone.append(path)
    return gone


class AlreadyServed(RuntimeError):
    """Another process serves this data dir."""


@contextlib.contextmanager
def serving(data_dir: Path) -> Iterator[None]:
    """Held by the serving process for its lifetime (a rebuild then offers its file instead of
    promoting it); removes what earlier promotions left. AlreadyServed if another process serves."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir / LOCK).open("a") as handle:
        if not _try_lock(handle):
            raise AlreadyServed(f"another process serves {data_dir} (it holds {data_dir / LOCK})")
        try:
            remove_unused(data_dir)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def unless_served(data_dir: Path) -> Iterator[bool]:
    """True (and no service can start meanwhile) when no process serves the data dir; False if one does."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir / LOCK).open("a") as handle:
        if not _try_lock(handle):
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _try_lock(handle: IO[str]) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _read(path: Path) -> str | None:
    try:
        name = path.read_text("utf-8").strip()
    except FileNotFoundError:
        return None
    return name if name and "/" not in name and name.endswith(".sqlite") else None


def _write(path: Path, name: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(name + "\n", "utf-8")
    os.replace(temporary, path)
