"""The OpenAPI document is the API: schemathesis, as a user runs it (`st run`, README: Probes), fuzzes a real
`changji serve` with the fake model as its main model — every check, the stateful phase through the
document's links — and finds nothing. Loopback only: schemathesis 4 sends nothing anywhere else."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes import CHANGJI, free_port, new_key, serving

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]  # where schemathesis.toml is (its hooks, its auth)
ST = str(Path(sys.executable).parent / "st")
EXAMPLES = "8"  # cases per operation and phase: a small run (README: Probes has the full-size one)


@contextlib.contextmanager
def fake_model(log: Path) -> Iterator[str]:
    """`changji fake-model` on a free loopback port: its base URL."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen([CHANGJI, "fake-model", "--port", str(port)], stdout=out, stderr=out)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, log.read_text()
            try:
                with urllib.request.urlopen(base + "/models", timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.skipif(shutil.which(ST) is None, reason="schemathesis is a dev dependency")
def test_schemathesis_finds_no_failure_with_every_check_and_the_stateful_phase(tmp_path: Path) -> None:
    data = tmp_path / "data"
    key = new_key(data)
    with fake_model(tmp_path / "fake.log") as upstream:
        env = {"CHANGJI_MAIN_BASE_URL": upstream, "CHANGJI_MAIN_MODEL": "fake-main", "CHANGJI_EMBEDDER": "none"}
        with serving(data, key, env=env) as server:
            run = subprocess.run(
                [
                    ST, "run", f"{server.base}/openapi.json", "--checks", "all", "--max-examples", EXAMPLES,
                    "--phases", "examples,coverage,fuzzing,stateful", "--generation-database", "none",
                    "--no-color", "--seed", "1",
                ],
                cwd=ROOT, env={**os.environ, "CHANGJI_KEY": key}, capture_output=True, text=True, timeout=300,
                check=False,
            )  # fmt: skip
            assert server.log is not None
            log = server.log.read_text()
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-2000:]  # (st exits 1 on any failure or error)
    assert "Stateful" in run.stdout, run.stdout[-8000:]
    assert "Traceback" not in log and key not in log, log[-4000:]
