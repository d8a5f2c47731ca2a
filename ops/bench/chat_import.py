"""SillyTavern chat import and export: a generated chat of N messages parsed, imported over HTTP into a
real `changji serve`, exported back.

    python ops/bench/chat_import.py [--quick | --smoke] [--messages 10000]

The chat (`--messages` user and reply messages, default 10,000; --quick: 1,000; --smoke: 200) is generated at run time
in SillyTavern's `.jsonl` form: a header, a greeting with two swipes (the card's `first_mes` and alternate
greeting), then user and reply messages in turn, ending on a reply (the import then announces the
compaction the path is due), with texts of 60–200 characters from the MemoryBank chats (`_common.texts`,
read from shared/data; a synthetic pool if absent), dates a minute or two apart in SillyTavern's
"December 1, 2024 3:04pm" form, swipes (2–4, with `swipe_info`) on about 10% of the replies and a hidden
(`is_system`) user/reply pair about every 200 messages.

Measured in one run, one after the other:
- parse: `interchange.chats.read_chat` on the bytes in this process (the median of 3 runs), and the plan
  made into the story's steps (`service.chat_transfer.imported_chat`);
- import: `changji serve` started as a subprocess on a fresh data dir (CHANGJI_EMBEDDER=none: recall by
  its BM25 rankings, nothing embedded), a card created over HTTP, then one `POST /v1/stories/import` of
  the file as the raw body, timed end to end at the client (urllib, loopback): messages/s and nodes/s;
- side work: the story's background jobs (the compaction the import announced, the replies' scribe jobs,
  skipped with no side model) waited for until settled (`settle_s` after the import answered, polled every
  0.5 s), with the compaction jobs made, the episodes written and the turns left uncovered;
- export: `GET /v1/stories/{id}/export?scope=tree` (each reply's siblings as its swipes) and `scope=path`,
  timed at the client; the tree export is read back with `read_chat` and must hold the same steps and
  swipes as the file imported (`roundtrip_ok`);
- the server's resident memory (Linux /proc): idle before the import, right after it, after settling.

A refused import (non-2xx) is logged with its answer, the figures measured so far are printed with
`import_failed` 1, and the script exits with status 1.

Progress goes to stderr; the figures are one JSON object on the last line of stdout (`FIGURES`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from _common import SAMPLE_CARD, Texts, emit, figure_keys, log, parse_args, sized, texts
from _serving import rss_mb, start_server, stop, wait_settled

from interchange.chat_plan import ChatImportPlan
from interchange.chats import read_chat
from service.chat_transfer import imported_chat

FULL: dict[str, Any] = {"messages": 10_000}
QUICK: dict[str, Any] = {"messages": 1_000}
SMOKE: dict[str, Any] = {"messages": 200}  # a hidden pair, swipes and a compaction all the same
FIGURES = figure_keys(
    "messages", "file_mb", "swiped_replies", "swipes", "hidden", "parse_ms", "parse_messages_per_s", "plan_ms",
    "startup_s", "server_rss_mb_idle", "server_rss_mb_after_import", "import_s", "import_messages_per_s",
    "import_nodes_per_s", "steps", "nodes", "import_warnings", "settle_s", "server_rss_mb_after_settle",
    "compact_jobs", "compact_jobs_done", "episodes", "uncovered_turns", "export_tree_s", "export_path_s",
    "export_tree_mb", "export_path_mb", "roundtrip_ok", "import_failed", "quick", "smoke", "bench_s",
)  # fmt: skip
USER, CHAR = "林舟", SAMPLE_CARD.name
GREETINGS = ["*灯塔的铁门被风撞得砰砰作响。* 把湿衣服脱了，炉子上有姜汤。", "雾还没散。你醒了？船没了，人还在。"]
SWIPE_EVERY = 10  # about one reply in ten has swipes
HIDDEN_EVERY = 200  # a hidden (out-of-character) user/reply pair about every 200 messages
PARSE_RUNS = 3


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=int, help="user and reply messages in the chat (the greeting aside)")


# --- the chat -----------------------------------------------------------------------------------


def st_date(moment: datetime) -> str:
    """SillyTavern's `send_date` form: "December 1, 2024 3:04pm"."""
    half = "pm" if moment.hour >= 12 else "am"
    return f"{moment:%B} {moment.day}, {moment.year} {moment.hour % 12 or 12}:{moment.minute:02d}{half}"


def generate_chat(messages: int, pool: Texts) -> tuple[bytes, dict[str, int]]:
    """A SillyTavern chat of a greeting and `messages` user and reply messages (an even number: whole
    turns), and what it holds."""
    start = datetime(2024, 3, 1, 20, 0, tzinfo=UTC)
    rows: list[dict[str, Any]] = [
        {
            "user_name": USER,
            "character_name": CHAR,
            "create_date": "2024-03-01@20h00m00s",
            "chat_metadata": {"note_prompt": "", "tainted": False},
        },
        {
            "name": CHAR,
            "is_user": False,
            "is_system": False,
            "send_date": st_date(start),
            "mes": GREETINGS[0],
            "extra": {},
            "swipes": GREETINGS,
            "swipe_id": 0,
            "swipe_info": [],
        },
    ]
    counts = {"swiped_replies": 0, "swipes": 0, "hidden": 0}
    moment, pair = start, 0
    for i in range(1, messages + 1):
        user = i % 2 == 1
        if user:
            pair += 1
        moment += timedelta(minutes=1 + i % 2)
        user_text, reply_text = pool.pair(pair)
        hidden = pair % (HIDDEN_EVERY // 2) == 0
        row: dict[str, Any] = {
            "name": USER if user else CHAR,
            "is_user": user,
            "is_system": hidden,
            "send_date": st_date(moment),
            "mes": user_text if user else reply_text,
            "extra": {} if user else {"api": "openai", "model": "bench-model"},
        }
        counts["hidden"] += hidden
        if not user and pair % SWIPE_EVERY == 0:
            swipes = [pool.pair(pair + 977 * k)[1] for k in range(1, 2 + pair // SWIPE_EVERY % 3)] + [reply_text]
            chosen = pair % len(swipes)
            swipes[chosen], swipes[-1] = swipes[-1], swipes[chosen]
            row |= {
                "mes": swipes[chosen],
                "swipes": swipes,
                "swipe_id": chosen,
                "swipe_info": [
                    {"send_date": st_date(moment), "gen_started": None, "gen_finished": None, "extra": {}}
                    for _ in swipes
                ],
            }
            counts["swiped_replies"] += 1
            counts["swipes"] += len(swipes)
        rows.append(row)
    return b"\n".join(orjson.dumps(row) for row in rows), counts


def steps_of(plan: ChatImportPlan) -> list[tuple[str, str, bool, tuple[str, ...]]]:
    """Each step as role, chosen text, hidden, every swipe in order: what a round trip must keep."""
    out: list[tuple[str, str, bool, tuple[str, ...]]] = []
    for step in plan.steps:
        at = step.chosen_index
        swipes = (*step.alternatives[:at], step.chosen, *step.alternatives[at:])
        out.append((step.role, step.chosen.text, step.hidden, tuple(t.text for t in swipes)))
    return out


# --- HTTP ---------------------------------------------------------------------------------------


class Refused(RuntimeError):
    pass


def request(
    base: str, key: str, method: str, path: str, body: bytes | None = None, content_type: str = "application/json"
) -> tuple[float, int, bytes]:
    """One request: (seconds, status, body); a non-2xx answer is returned, not raised."""
    headers = {"Authorization": f"Bearer {key}"}
    if body is not None:
        headers["Content-Type"] = content_type
    req = urllib.request.Request(base + path, data=body, method=method, headers=headers)
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=900) as response:
            data = response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        data, status = error.read(), error.code
    return time.perf_counter() - t0, status, data


def ok(answer: tuple[float, int, bytes], what: str) -> tuple[float, bytes]:
    seconds, status, data = answer
    if not 200 <= status < 300:
        raise Refused(f"{what}: HTTP {status} {data[:500].decode(errors='replace')}")
    return seconds, data


def served(raw: bytes, plan: ChatImportPlan, tmp: Path, figures: dict[str, Any]) -> None:
    """Import, export and memory against a served process; figures added as they are measured."""
    log_path = tmp / "server.log"
    proc, base, key, figures["startup_s"] = start_server(tmp / "data", log_path)
    try:
        card = {"card": {**SAMPLE_CARD.model_dump(), "first_mes": GREETINGS[0], "alternate_greetings": GREETINGS[1:]}}
        _, data = ok(request(base, key, "POST", "/v1/cards", json.dumps(card).encode()), "create the card")
        card_id = json.loads(data)["id"]
        figures["server_rss_mb_idle"] = rss_mb(proc.pid)
        log(f"importing {figures['messages']:,} messages ({len(raw) / 2**20:.1f} MiB)…")
        seconds, data = ok(
            request(base, key, "POST", f"/v1/stories/import?card_id={card_id}", raw, "application/jsonl"), "import"
        )
        answer = json.loads(data)
        figures["server_rss_mb_after_import"] = rss_mb(proc.pid)
        figures["import_s"] = seconds
        figures["import_messages_per_s"] = figures["messages"] / seconds
        figures["import_nodes_per_s"] = answer["nodes"] / seconds
        figures["steps"], figures["nodes"] = answer["steps"], answer["nodes"]
        figures["import_warnings"] = len(answer["warnings"])
        story_id = answer["story"]["id"]
        log(f"imported in {seconds:.2f}s: {answer['steps']:,} steps, {answer['nodes']:,} nodes")

        figures["settle_s"] = wait_settled(base, key, story_id, 900)
        figures["server_rss_mb_after_settle"] = rss_mb(proc.pid)
        _, data = ok(request(base, key, "GET", f"/v1/jobs?story_id={story_id}&kind=compact&limit=500"), "jobs")
        compacts = json.loads(data)["items"]
        figures["compact_jobs"] = len(compacts)
        figures["compact_jobs_done"] = sum(j["status"] == "done" for j in compacts)
        _, data = ok(request(base, key, "GET", f"/v1/stories/{story_id}/summaries"), "summaries")
        summaries = json.loads(data)
        figures["episodes"], figures["uncovered_turns"] = len(summaries["episodes"]), summaries["uncovered_turns"]
        log(f"settled {figures['settle_s']:.2f}s after the import: {len(compacts)} compaction job(s), "
            f"{figures['uncovered_turns']} turns left uncovered")  # fmt: skip

        export = f"/v1/stories/{story_id}/export?format=sillytavern"
        figures["export_tree_s"], tree = ok(request(base, key, "GET", f"{export}&scope=tree"), "export (tree)")
        figures["export_path_s"], path = ok(request(base, key, "GET", f"{export}&scope=path"), "export (path)")
        figures["export_tree_mb"], figures["export_path_mb"] = len(tree) / 2**20, len(path) / 2**20
        back = read_chat(tree)
        same_greetings = [g.text for g in back.greetings] == [g.text for g in plan.greetings]
        figures["roundtrip_ok"] = steps_of(back) == steps_of(plan) and same_greetings
        log(f"exported in {figures['export_tree_s']:.2f}s (tree), {figures['export_path_s']:.2f}s (path)")
    except BaseException:
        log(log_path.read_text(errors="replace")[-3000:])
        raise
    finally:
        stop(proc)


def main() -> None:
    args = parse_args(__doc__, _extra)
    messages = args.messages or sized(args, FULL, QUICK, SMOKE)["messages"]
    messages += messages % 2  # whole turns: the chat ends on a reply
    started = time.perf_counter()
    raw, counts = generate_chat(messages, texts())
    figures: dict[str, Any] = {"messages": messages, "file_mb": len(raw) / 2**20, **counts}

    runs = []
    for _ in range(PARSE_RUNS):
        t0 = time.perf_counter()
        plan = read_chat(raw)
        runs.append(time.perf_counter() - t0)
    figures["parse_ms"] = statistics.median(runs) * 1000
    figures["parse_messages_per_s"] = messages / statistics.median(runs)
    t0 = time.perf_counter()
    imported_chat(plan, SAMPLE_CARD.model_copy(update={"alternate_greetings": GREETINGS[1:]}), "bench")
    figures["plan_ms"] = (time.perf_counter() - t0) * 1000
    log(f"parsed {messages:,} messages in {figures['parse_ms']:.1f} ms ({len(plan.steps):,} steps)")

    failed = False
    with tempfile.TemporaryDirectory(prefix="changji-bench-chat-import-") as tmp:
        try:
            served(raw, plan, Path(tmp), figures)
        except Refused as refused:
            log(f"refused: {refused}")
            failed = True
    figures["import_failed"] = failed
    figures["quick"] = bool(args.quick)
    figures["smoke"] = args.smoke
    figures["bench_s"] = time.perf_counter() - started
    emit(figures)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
