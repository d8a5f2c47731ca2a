"""Malformed-request probe: raw bytes no well-behaved client sends, a valid API key inside many of them,
against a real `changji serve`; counts answers of 500 and above, answers that are not problem+json,
and any appearance of the key in an answer or in the server's log.

    python ops/probe/bad_requests.py [--smoke]

Figures (last-line JSON, `FIGURES`): `requests`, `status_5xx`, `not_problem_json`, `key_in_answers`,
`key_in_log`, `unanswered` (no answer within 3 s). --smoke: every eighth request, each answer read until
the server has been quiet for 0.5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

CHANGJI = str(Path(sys.executable).parent / "changji")
FULL: dict[str, Any] = {"every": 1, "quiet": 3.0}  # send every how many cases; seconds of quiet ending an answer
SMOKE: dict[str, Any] = {"every": 8, "quiet": 0.5}
FIGURES = frozenset({"requests", "status_5xx", "not_problem_json", "key_in_answers", "unanswered", "key_in_log"})


def cases(key: bytes, story: bytes) -> list[bytes]:
    auth = b"Authorization: Bearer " + key
    path = b"/v1/stories/" + story
    heads = [
        auth + b"\x01",
        auth + b"\x00",
        auth + b"\x7f",
        auth + b" " * 9000,
        auth + b"x" * 20000,
        b"Authorization: Bearer \xff\xfe",
        b"Authorization: Basic " + key,
        b"Authorization: " + key,
        auth + b"\r\nIdempotency-Key: caf\xe9",
        auth + b"\r\nIdempotency-Key: ",
        auth + b"\r\nIf-Match: \xff",
        auth + b'\r\nIf-Match: W/"x"',
        auth + b"\r\nX-Long: " + b"y" * 9000,
        auth + b"\r\nBad Header: 1",
        auth + b"\r\n: empty name",
        auth + b"\r\nContent-Type: application/json\x01",
    ]
    out = [b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n\r\n" for head in heads]
    out += [
        b"POST " + path + b"/nodes HTTP/1.1\r\nHost: x\r\n" + head + b"\r\nContent-Length: 2\r\n\r\n{}"
        for head in heads
    ]
    out += [
        b"GET "
        + path
        + b"/search?q=\xe5\xa4\xa9 HTTP/1.1\r\nHost: x\r\n"
        + auth
        + b"\r\n\r\n",  # raw UTF-8 in the line
        b"GET " + path + b"?" + b"a" * 10000 + b" HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n\r\n",
        b"BREW " + path + b" HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n\r\n",
        b"GET " + path + b" HTTP/9.9\r\nHost: x\r\n" + auth + b"\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + key,  # TLS to an HTTP port
        b"POST " + path + b"/nodes HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\nContent-Length: 10000000000\r\n\r\n",
        b"POST " + path + b"/nodes HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\nContent-Length: -1\r\n\r\n",
        b"POST " + path + b"/nodes HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"POST " + path + b"/nodes HTTP/1.1\r\nHost: x\r\n" + auth + b'\r\nContent-Length: 9\r\n\r\n{"kind":\xff}',
        b"PATCH " + path + b" HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\nContent-Length: 0\r\n\r\n",
        b"DELETE " + path + b"/nodes HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n\r\n",
    ]
    return out


def send(port: int, raw: bytes, quiet: float = 3.0) -> bytes | None:
    """The answer to `raw`: read until the server closes, or until it has been quiet for `quiet` seconds (a
    kept-alive connection) — None when nothing came back at all."""
    with socket.create_connection(("127.0.0.1", port), timeout=quiet) as conn:
        conn.sendall(raw)
        chunks = []
        try:
            while chunk := conn.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            pass
        return b"".join(chunks) or None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="a few requests, short waits: finishes in seconds")
    plan = SMOKE if parser.parse_args().smoke else FULL
    root = Path(tempfile.mkdtemp(prefix="changji-probe-"))
    data_dir = root / "data"
    key = subprocess.run(
        [CHANGJI, "keys", "create", "--data-dir", str(data_dir)], capture_output=True, text=True, check=True
    ).stdout.split()[0]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_path = root / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [CHANGJI, "serve", "--data-dir", str(data_dir), "--port", str(port)], stdout=log, stderr=log,
            env={**os.environ, "CHANGJI_EMBEDDER": "none", "CHANGJI_ACCESS_LOG": "1", "CHANGJI_BODY_SECONDS": "2"},
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(base + "/healthz", timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)

    def api(method: str, path: str, body: object) -> dict[str, str]:
        request = urllib.request.Request(
            base + path, data=json.dumps(body).encode(), method=method,
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    card = api("POST", "/v1/cards", {"card": {"name": "沈砚"}})
    story = api("POST", "/v1/stories", {"card_id": card["id"]})
    figures = {"requests": 0, "status_5xx": 0, "not_problem_json": 0, "key_in_answers": 0, "unanswered": 0}
    for raw in cases(key.encode(), story["id"].encode())[:: plan["every"]]:
        figures["requests"] += 1
        answer = send(port, raw, plan["quiet"])
        if not answer:
            figures["unanswered"] += 1
            continue
        head, _, _ = answer.partition(b"\r\n\r\n")
        parts = head.split(b" ", 2)
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        figures["status_5xx"] += status >= 500
        if status >= 400 and b"application/problem+json" not in head:
            figures["not_problem_json"] += 1
            print(f"not problem+json ({status}): {raw[:60]!r}", file=sys.stderr)
        figures["key_in_answers"] += key.encode() in answer
    process.terminate()
    process.wait(timeout=30)
    figures["key_in_log"] = log_path.read_bytes().count(key.encode())
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
