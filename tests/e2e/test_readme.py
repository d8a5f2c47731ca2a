"""The README's shell examples, run as written against a real `changji serve`.

Which blocks: a fenced ```bash block right after a line `<!-- tested: tour -->` (an HTML comment, which
GitHub does not show) is part of the tour. The marked blocks run in README order in one bash process
(`set -euo pipefail`), so what one block sets (H, J, B, CARD, STORY, REPLY, …) is there for the next.
Unmarked blocks are not run: setting up (`make serve`, the `export`s of a provider's model) and
`changji import`, which wants the server stopped.

The server: `changji serve` on a free loopback port (`tests.processes.serving`) with a key from `new_key`;
its main model is the project's `FakeModelServer` on loopback, which writes every reply through the draft
tools (a paragraph, long enough for the compaction example) and asks a decision with `ask` when the
user's words ask which way to go (往哪边), so the answer example has a card to answer. The README is
pointed at that server by two substitutions and nothing else: the tour's line `KEY=cj_…` takes the test's
key, and `http://127.0.0.1:8780` the server's address. The files the examples name (`Seraphina.png`,
`Eldoria.json`, `chat.jsonl`) are a user's own: the test writes small ones of those formats into the
directory the script runs in.

Every call is checked: `curl` is a bash function that runs the real curl with `-sS` and
`--write-out '%{stderr}…%{http_code}'` (what goes to stdout, and so to jq, is unchanged; SSE with `-N` streams
as before) and records the call's line and status. A call must answer 2xx unless its command says
otherwise in a comment with an arrow and a status (`# → 409`): then it must answer exactly that. The first
call that does not stops the script (the function fails under `set -e`), and the test names the README line,
its command, the status and the body. The test also fails when a README line with a curl call never ran.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from providers.fake_server import FakeModelServer, Step, Text, ToolCalls
from tests.processes import new_key, serving

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"
MARK = "<!-- tested: tour -->"
DOCUMENTED_BASE = "http://127.0.0.1:8780"
KEY_LINE = re.compile(r"^KEY=cj_…(?=\s|$)")
EXPECTED = re.compile(r"#.*→\s*(\d{3})\b")
CURL_CALL = re.compile(r"(?:^|[\s;|&(])curl\s")

PRELUDE = r"""set -euo pipefail
shopt -s inherit_errexit
curl() {  # the real curl, its status recorded and checked (see the test's docstring)
  local line=${BASH_LINENO[0]} out rc=0 status
  out=$(mktemp -p "$README_TMP" call.XXXXXX)
  command curl -sS --write-out '%{stderr}\n@@status=%{http_code}\n' "$@" 2>"$out.err" | tee "$out" || rc=$?
  status=$(sed -n 's/^@@status=//p' "$out.err" | tail -n 1)
  printf '%s\t%s\t%s\t%s\n' "$line" "${status:-000}" "$rc" "$out" >>"$README_CALLS"
  local expected=${README_EXPECT[$line]:-2xx}
  if [[ $expected == 2xx ]]; then [[ ${status:-000} == 2?? ]] || return 1
  else [[ ${status:-000} == "$expected" ]] || return 1; fi
  return "$rc"
}
jq() {  # the real jq; a null in what it prints is a field the answer does not have
  local line=${BASH_LINENO[0]} printed
  printed=$(command jq "$@") || return
  if grep -qx null <<<"$printed"; then printf '%s\n' "$line" >>"$README_NULLS"; return 1; fi
  printf '%s\n' "$printed"
}
"""


@dataclass(frozen=True)
class Line:
    number: int  # in README.md, from 1
    text: str
    code: str  # the text before its comment
    command: tuple[int, int]  # the README lines of the command it belongs to, first and last


def tour_lines(readme: str) -> list[Line]:
    """The lines of the marked blocks, in order, each with its command's span."""
    lines = readme.splitlines()
    picked: list[tuple[int, str]] = []
    index = 0
    while index < len(lines):
        if lines[index].strip() == MARK:
            fence = lines[index + 1].strip()
            assert fence in ("```bash", "```sh"), f"README.md:{index + 2}: a `{MARK}` must precede a ```bash fence"
            index += 2
            while lines[index].strip() != "```":
                picked.append((index + 1, lines[index]))
                index += 1
        index += 1
    return _commands(picked)


def _commands(picked: list[tuple[int, str]]) -> list[Line]:
    """Each line's code (its comment cut off) and the command it is part of: a command goes on past a line
    that ends in a backslash or inside quotes or `$(…)`."""
    result: list[Line] = []
    start, single, double, depth = 0, False, False, 0
    pending: list[tuple[int, str, str]] = []
    for number, text in picked:
        code_end, i = len(text), 0
        while i < len(text):
            c = text[i]
            if single:
                single = c != "'"
            elif c == "\\":
                i += 1
            elif double:
                double = c != '"'
            elif c == "'":
                single = True
            elif c == '"':
                double = True
            elif c == "(":
                depth += 1
            elif c == ")":
                depth = max(0, depth - 1)
            elif c == "#" and (i == 0 or text[i - 1].isspace()):
                code_end = i
                break
            i += 1
        code = text[:code_end]
        if not pending:
            start = number
        pending.append((number, text, code))
        if not (single or double or depth or code.rstrip().endswith("\\")):
            result.extend(Line(n, t, c, (start, number)) for n, t, c in pending)
            pending = []
    assert not pending, f"README.md:{start}: a command of the tour is never closed"
    return result


@dataclass(frozen=True)
class Tour:
    script: str
    origin: dict[int, Line]  # the script's line numbers (bash's, from 1) → the README's lines
    expected: dict[int, str]  # README line → the status its command says it answers


def tour_for(lines: list[Line], key: str, base: str) -> Tour:
    """The bash script (the prelude, then the tour's lines with the key and the address put in)."""
    keyed = [line for line in lines if KEY_LINE.match(line.text)]
    assert len(keyed) == 1, "the tour sets KEY=cj_… once"
    assert any(DOCUMENTED_BASE in line.text for line in lines), f"the tour calls {DOCUMENTED_BASE}"
    expected = {}
    for line in lines:
        spanned = [other for other in lines if other.command == line.command]
        statuses = {m.group(1) for other in spanned if (m := EXPECTED.search(other.text[len(other.code) :]))}
        assert len(statuses) <= 1, f"README.md:{line.number}: one expected status a command"
        if statuses:
            expected[line.number] = statuses.pop()
    head = PRELUDE.splitlines()
    first = len(head) + 2  # (after the prelude and the line of README_EXPECT)
    origin = {first + offset: line for offset, line in enumerate(lines)}
    expect = " ".join(f"[{n}]={expected[line.number]}" for n, line in origin.items() if line.number in expected)
    body = [KEY_LINE.sub(f"KEY={key}", line.text).replace(DOCUMENTED_BASE, base) for line in lines]
    return Tour("\n".join([*head, f"declare -A README_EXPECT=({expect})", *body, ""]), origin, expected)


# --- the main model --------------------------------------------------------------------------------------

PARAGRAPH = (
    "雨还在下，渡口的灯一盏一盏亮起来。沈砚把缆绳绕在木桩上，回头看了一眼来路：泥地上只有两行脚印，"
    "一行是他的，一行是你的。远处的水面起了雾，雾里隐约有船的影子，又很快看不见了。"
    "他说北屿的灯塔已经很多年没有人守，可每到这样的夜里，总有人看见塔顶有光。\n\n"
    "船来得比预想的晚。船夫是个沉默的老人，收了钱，只点点头，让你们坐在船尾。"
    "沈砚一路没有说话，只在船过礁石的时候伸手扶了你一下。雾越来越浓，桨声在水面上回荡，"
    "像是有另一条船跟在后面。等到北屿的轮廓从雾里浮出来，塔顶的光果然亮着，一明一灭，像在数着什么。"
)


class MainModel:
    """The main model: a reply (the user's words, then a paragraph) through draft_write, then draft_seal;
    the first time the user's words ask which way to go, `ask` after the write (a regenerate of those words
    just writes); plain text when it is offered no tools (the proxy)."""

    def __init__(self) -> None:
        self.asked = False

    def __call__(self, body: Mapping[str, Any]) -> Step:
        messages = body.get("messages") or []
        if messages and messages[-1].get("role") == "tool":
            return ToolCalls(("draft_seal", {"version": 1}))
        words = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
        said = words.strip().split("\n\n")[-1][:40]
        reply = f"「{said}」{PARAGRAPH}"
        if not body.get("tools"):
            return Text(reply)
        write = ("draft_write", {"version": 0, "content": reply})
        if "往哪边" in said and not self.asked:
            self.asked = True
            return ToolCalls(write, ("ask", {"question": "往哪边走？", "options": ["向南", "向北"]}))
        return ToolCalls(write)


# --- the user's own files ---------------------------------------------------------------------------------


def write_users_files(where: Path) -> None:
    card = {
        "name": "Seraphina",
        "description": "A guardian of the forest of Eldoria.",
        "personality": "kind, protective",
        "scenario": "You wake in her glade.",
        "first_mes": "You wake to the smell of herbs. Seraphina sits beside you.",
        "mes_example": "",
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": [],
        "tags": [],
        "creator": "",
        "character_version": "1",
        "extensions": {},
    }
    chara = base64.b64encode(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": card}).encode())
    (where / "Seraphina.png").write_bytes(_png(b"chara\x00" + chara))
    entries = {
        str(uid): {"uid": uid, "key": [key], "keysecondary": [], "comment": key, "content": content, "order": 100}
        for uid, (key, content) in enumerate(
            [
                ("Eldoria", "An ancient forest, home of Seraphina's glade."),
                ("glade", "Seraphina's glade is hidden and warded."),
                ("monsters", "Shadow creatures roam the forest at night."),
                ("amulet", "Seraphina's amulet keeps the wards alive."),
            ]
        )
    }
    (where / "Eldoria.json").write_text(json.dumps({"entries": entries}), encoding="utf-8")
    chat = [
        {"user_name": "Anna", "character_name": "Seraphina", "create_date": "2024-12-01@15h04m00s"},
        {"name": "Seraphina", "is_user": False, "send_date": "December 1, 2024 3:04pm", "mes": card["first_mes"]},
        {"name": "Anna", "is_user": True, "send_date": "December 1, 2024 3:05pm", "mes": "Where am I?"},
        {
            "name": "Seraphina",
            "is_user": False,
            "send_date": "December 1, 2024 3:05pm",
            "mes": "In my glade, safe.",
            "swipes": ["In my glade, safe.", "Safe, in the heart of Eldoria."],
            "swipe_id": 0,
        },
    ]
    (where / "chat.jsonl").write_text("\n".join(json.dumps(line) for line in chat), encoding="utf-8")


def _png(text_chunk: bytes) -> bytes:
    """A 1×1 grey PNG with one tEXt chunk."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return b"".join(
        [
            b"\x89PNG\r\n\x1a\n",
            chunk(b"IHDR", header),
            chunk(b"tEXt", text_chunk),
            chunk(b"IDAT", zlib.compress(b"\x00\x80")),
            chunk(b"IEND", b""),
        ]
    )


# --- the run ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    line: Line
    status: str
    curl_exit: int
    body: str


def calls_made(record: Path, origin: dict[int, Line]) -> list[Call]:
    calls = []
    for row in record.read_text(encoding="utf-8").splitlines() if record.exists() else []:
        script_line, status, curl_exit, out = row.split("\t")
        body = Path(out).read_bytes().decode("utf-8", "replace") if Path(out).exists() else ""
        calls.append(Call(origin[int(script_line)], status, int(curl_exit), body))
    return calls


def problems(tour: Tour, lines: list[Line], scratch: Path, finished: bool) -> list[str]:
    """Every call that answered what its line does not expect, every jq that printed a null, and (once the
    script ran to its end) every README line with a curl call that never ran."""
    found = []
    calls = calls_made(scratch / "calls.tsv", tour.origin)
    for call in calls:
        want = tour.expected.get(call.line.number)
        ok = call.status == want if want else call.status.startswith("2")
        if not ok or call.curl_exit:
            found.append(
                f"README.md:{call.line.number}: {call.line.text.strip()}\n"
                f"  answered {call.status} (expected {want or '2xx'}; curl exit {call.curl_exit}): {call.body[:600]}"
            )
    nulls = scratch / "nulls.txt"
    for script_line in nulls.read_text(encoding="utf-8").split() if nulls.exists() else []:
        line = tour.origin[int(script_line)]
        found.append(f"README.md:{line.number}: {line.text.strip()}\n  jq printed null: the answer has no such field")
    ran = {call.line.command for call in calls}
    for line in lines if finished else []:
        if CURL_CALL.search(line.code) and line.command not in ran:
            found.append(f"README.md:{line.number}: never ran: {line.text.strip()}")
    return found


async def test_the_readmes_shell_examples_run_as_written(tmp_path: Path) -> None:
    missing = [tool for tool in ("bash", "curl", "jq") if shutil.which(tool) is None]
    assert not missing, f"the README's examples need {', '.join(missing)} (`.ci/run` installs them)"
    lines = tour_lines(README.read_text(encoding="utf-8"))
    work, scratch = tmp_path / "work", tmp_path / "calls"
    work.mkdir()
    scratch.mkdir()
    write_users_files(work)
    data_dir = tmp_path / "data"
    key = new_key(data_dir)
    async with FakeModelServer(MainModel()) as fake:
        env = {
            "CHANGJI_MAIN_BASE_URL": fake.url,
            "CHANGJI_MAIN_MODEL": "fake-model",
            "CHANGJI_MAIN_API_KEY": "sk-fake",
            "CHANGJI_EMBEDDER": "none",  # recall by words alone: e5 would add some 9 s that no example needs
        }
        with serving(data_dir, key, env) as server:
            tour = tour_for(lines, key, server.base)
            script = scratch / "tour.sh"
            script.write_text(tour.script, encoding="utf-8")
            files = {"README_CALLS": "calls.tsv", "README_NULLS": "nulls.txt", "README_TMP": "."}
            shell_env = {**os.environ, **{name: str((scratch / file).resolve()) for name, file in files.items()}}
            ran = await asyncio.to_thread(
                subprocess.run,
                ["bash", str(script)],
                cwd=work,
                env=shell_env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
    found = problems(tour, lines, scratch, finished=ran.returncode == 0)
    if ran.returncode != 0 and not found:
        found.append(f"the tour's bash exited {ran.returncode}")
    assert not found, "\n".join([*found, "--- bash's stderr (last lines):", *ran.stderr.splitlines()[-15:]])
