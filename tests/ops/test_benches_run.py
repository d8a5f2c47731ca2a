"""Every benchmark (ops/bench/*.py, its helpers `_*.py` aside) and every probe (ops/probe/*.py) runs with
`--smoke` as a real process within SMOKE_SECONDS, exits 0 and prints, as the last line of its stdout, one
JSON object of exactly the keys its module-level `FIGURES` promises, each a finite number (or a bool).

The scripts are found by globbing, so a new one without `--smoke` or `FIGURES` fails here as well. The
benchmarks read LoCoMo and the MemoryBank chats from shared/data (`tests/shared_data.py`); without them
these tests fail rather than let the scripts fall back to their synthetic texts."""

from __future__ import annotations

import contextlib
import json
import math
import os
import runpy
import signal
import subprocess
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.chromium import require_chromium
from tests.shared_data import shared_data

OPS = Path(__file__).resolve().parents[2] / "ops"
SCRIPTS = sorted(p for p in (OPS / "bench").glob("*.py") if not p.name.startswith("_")) + sorted(
    (OPS / "probe").glob("*.py")
)
SMOKE_SECONDS = 60  # each script's limit; most take a few seconds
BROWSER_SCRIPTS = ("web_page.py",)  # they drive chromium (`tests/chromium.py`)
DATA = ("locomo", "memorybank_siliconfriend")  # what the benchmarks read from shared/data


def declared(script: Path, keys: str = "FIGURES") -> frozenset[str]:
    """The script's `FIGURES` (or the set of keys named `keys`), read by running its module body (not its
    main) in this process; the modules it imports from ops/ (`_common`, another benchmark) are let go after."""
    modules = set(sys.modules)
    sys.path.insert(0, str(script.parent))
    try:
        namespace = runpy.run_path(str(script), run_name=f"figures_of_{script.stem}")
    finally:
        sys.path.remove(str(script.parent))
        for name in set(sys.modules) - modules:
            if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(OPS)):
                del sys.modules[name]
    figures = namespace.get(keys)
    assert (
        isinstance(figures, Collection)
        and not isinstance(figures, str)
        and figures
        and all(isinstance(key, str) for key in figures)
    ), f"{script.name} declares no {keys} (the keys of its last line): {figures!r}"
    return frozenset(figures)


def problems(line: str, promised: frozenset[str]) -> list[str]:
    """What is wrong with a script's last line against the keys it promises (nothing: an empty list)."""
    try:
        figures = json.loads(line)
    except ValueError:
        return [f"the last line is not JSON: {line[:300]!r}"]
    if not isinstance(figures, dict):
        return [f"the last line is not a JSON object: {line[:300]!r}"]
    found = []
    if missing := sorted(promised - figures.keys()):
        found.append(f"promised but missing: {', '.join(missing)}")
    if unexpected := sorted(figures.keys() - promised):
        found.append(f"not promised: {', '.join(unexpected)}")
    for key, value in figures.items():
        if not isinstance(value, bool) and not (isinstance(value, int | float) and math.isfinite(value)):
            found.append(f"{key} is not a finite number: {value!r}")
    return found


@pytest.fixture(scope="module")
def shared_root() -> Path:
    """The folder holding data/ with what the benchmarks read (FileNotFoundError when it is not there)."""
    roots = {shared_data(name).parents[1] for name in DATA}
    assert len(roots) == 1, f"shared/data is split over {sorted(map(str, roots))}"
    return roots.pop()


def run_smoke(script: Path, shared: Path, tmp: Path, extra: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """`python <script> --smoke` (and `extra` arguments) in a process group of its own, its temp files under `tmp`. Past SMOKE_SECONDS
    (or on an interrupt) the script and every process it started are killed, and the test fails with what
    it wrote to stderr; a server it left running when it ended is killed too."""
    env = {**os.environ, "CHANGJI_SHARED": str(shared), "TMPDIR": str(tmp)}
    command = [sys.executable, str(script), "--smoke", *extra]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp, env=env, start_new_session=True
    )
    try:
        out, err = process.communicate(timeout=SMOKE_SECONDS)
    except BaseException as stopped:
        _kill_group(process.pid)
        out, err = process.communicate()
        if not isinstance(stopped, subprocess.TimeoutExpired):
            raise
        pytest.fail(f"{script.name} --smoke ran past {SMOKE_SECONDS} s; its stderr ends:\n{err[-3000:]}")
    _kill_group(process.pid)
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _kill_group(group: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_script_runs_at_its_smoke_size_and_prints_the_figures_it_promises(
    script: Path, shared_root: Path, tmp_path: Path
) -> None:
    promised = declared(script)
    if script.name in BROWSER_SCRIPTS:
        require_chromium()
    done = run_smoke(script, shared_root, tmp_path)
    assert done.returncode == 0, (
        f"{script.name} --smoke exited with {done.returncode}; stderr ends:\n{done.stderr[-3000:]}"
    )
    lines = done.stdout.strip().splitlines()
    assert lines, f"{script.name} --smoke printed nothing; stderr ends:\n{done.stderr[-3000:]}"
    found = problems(lines[-1], promised)
    assert not found, f"{script.name} --smoke, its last line:\n" + "\n".join(found)


def last_figures(done: subprocess.CompletedProcess[str], script: Path, promised: frozenset[str]) -> dict[str, float]:
    """The figures of a finished smoke run, checked against what it promised."""
    assert done.returncode == 0, f"{script.name} exited with {done.returncode}; stderr ends:\n{done.stderr[-3000:]}"
    lines = done.stdout.strip().splitlines()
    assert lines and not (found := problems(lines[-1], promised)), f"{script.name}, its last line:\n{found}"
    figures: dict[str, float] = json.loads(lines[-1])
    return figures


@pytest.mark.slow
@pytest.mark.both_stores
def test_turns_offered_at_a_rate_are_measured_on_either_store(
    database_url: str | None, shared_root: Path, tmp_path: Path
) -> None:
    script = OPS / "bench" / "http_load.py"
    shared = ["--database-url", database_url] if database_url else []
    done = run_smoke(script, shared_root, tmp_path, ["--rate", "20", *shared])
    figures = last_figures(done, script, declared(script, "RATE_FIGURES"))
    assert figures["postgresql"] == (database_url is not None) and figures["turns_finished"] == 20
    assert figures["errors"] == 0 and 0 < figures["p50_ms"] <= figures["p99_ms"] <= figures["p999_ms"]
    assert figures["server_cpu_ms_per_turn"] > 0
    assert (figures["database_cpu_ms_per_turn"] > 0) == (database_url is not None)  # (a server on this machine)


@pytest.mark.slow
def test_the_crash_probe_kills_processes_sharing_a_database_and_nothing_is_lost(
    postgres_server: Any, shared_root: Path, tmp_path: Path
) -> None:
    script = OPS / "probe" / "kill_retries.py"
    done = run_smoke(script, shared_root, tmp_path, ["--database-url", postgres_server.new_database()])
    figures = last_figures(done, script, declared(script))
    assert figures["servers"] == 3 and figures["acknowledged"] > 0
    assert figures["lost"] == figures["duplicates"] == figures["refused"] == 0


def test_scripts_are_found_in_both_folders() -> None:
    assert {p.parent.name for p in SCRIPTS} == {"bench", "probe"}
    assert not any(p.name.startswith("_") for p in SCRIPTS)


def test_the_check_names_missing_unexpected_and_non_finite_figures() -> None:
    promised = frozenset({"a", "b"})
    assert problems('{"a": 1, "b": 0.5}', promised) == []
    assert problems('{"a": true, "b": -1}', promised) == []
    assert problems('{"a": 1}', promised) == ["promised but missing: b"]
    assert problems('{"a": 1, "b": 2, "c": 3}', promised) == ["not promised: c"]
    assert problems('{"a": NaN, "b": "2"}', promised) == [
        "a is not a finite number: nan",
        "b is not a finite number: '2'",
    ]
    assert problems("done in 3 s", promised) == ["the last line is not JSON: 'done in 3 s'"]
    assert problems("[1, 2]", promised) == ["the last line is not a JSON object: '[1, 2]'"]
