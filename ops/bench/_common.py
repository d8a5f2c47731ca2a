"""Helpers shared by the benchmark scripts in ops/bench/ (never imported by the service).

- `texts()`: realistic turn texts (60–200 characters, Chinese with some English), taken at run time
  from the MemoryBank (SiliconFriend, MIT) chats in shared/data — nothing is copied into the repo;
  a small synthetic pool is used if the data is not there.
- `sqlite_app(path)`: a `Changji` on an SQLite event store (the class defaults plus the SQLite env).
- `build_story(...)`: a story of N turns with branches (a regenerated reply every ~50 turns, a short
  side branch every ~500 turns), written through `Changji.stories.append_node`, timing every append.
- `emit(figures)`: the convention's last line — one flat JSON object of numbers on stdout.
- `parse_args(...)`, `sized(...)`: every script's three sizes — the full run, `--quick` (about a minute)
  and `--smoke` (tiny inputs, a few seconds, through the same code: CI runs every script so) — and
  `figure_keys(...)`: the keys a script's last line promises (its `FIGURES`), the same at every size.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Formatter
from typing import Any, TypeVar
from uuid import UUID, uuid4

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # the package is installed editable; this only helps a bare checkout
    sys.path.append(str(REPO))

from api.settings import Settings  # noqa: E402
from domain.application import Changji  # noqa: E402
from domain.values import CardData, StorySettings  # noqa: E402

DATA_DIRS = (
    Path(os.environ.get("CHANGJI_SHARED", REPO.parent / "shared")) / "data" / "memorybank_siliconfriend",
    Path("/work/shared/data/memorybank_siliconfriend"),
)
TENANT = "bench"
USER_NAME = "林舟"
T = TypeVar("T")


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def parse_args(doc: str | None, extra: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0] if doc else None)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="smaller inputs; finishes in about a minute")
    size.add_argument(
        "--smoke",
        action="store_true",
        help="tiny inputs, figures that mean nothing: finishes in seconds, the last line with the full run's keys",
    )
    if extra is not None:
        extra(parser)
    return parser.parse_args()


def sized(args: argparse.Namespace, full: T, quick: T, smoke: T) -> T:
    """The plan of the run's size: `smoke` with --smoke, `quick` with --quick, else `full`."""
    return smoke if args.smoke else quick if args.quick else full


def figure_keys(*templates: str, **values: Iterable[object]) -> frozenset[str]:
    """The keys the templates name: a template's every `{name}` replaced by each of `values[name]`, in every
    combination (`figure_keys("{v}_p50_ms", v=("raw", "floor"))` is raw_p50_ms and floor_p50_ms)."""
    keys: set[str] = set()
    for template in templates:
        names = sorted({name for _, name, _, _ in Formatter().parse(template) if name})
        for chosen in itertools.product(*(tuple(values[name]) for name in names)):
            keys.add(template.format(**dict(zip(names, chosen, strict=True))))
    return frozenset(keys)


def emit(figures: dict[str, Any]) -> None:
    """Print the figures as one flat JSON object on the last line of stdout (numbers only)."""
    flat: dict[str, float | int] = {}
    for key, value in figures.items():
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, float):
            value = round(value, 4) if math.isfinite(value) else -1
        if not isinstance(value, int | float):
            raise TypeError(f"figure {key} is not a number: {value!r}")
        flat[key] = value
    sys.stdout.flush()
    print(json.dumps(flat, sort_keys=False), flush=True)


def median_ms(seconds: Sequence[float]) -> float:
    return statistics.median(seconds) * 1000 if seconds else float("nan")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of unsorted values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


# --- texts --------------------------------------------------------------------------------------


def _load_pairs(name: str) -> list[tuple[str, str]]:
    for folder in DATA_DIRS:
        path = folder / name
        if path.exists():
            data = json.loads(path.read_text("utf-8"))
            return [
                (turn["query"], turn["response"])
                for person in data.values()
                for day in person.get("history", {}).values()
                for turn in day
                if turn.get("query") and turn.get("response")
            ]
    return []


def _fit(text: str, extra: Iterator[str], low: int = 60, high: int = 200) -> str:
    """Pad `text` with English sentences up to `low` characters, cut it at `high`."""
    while len(text) < low:
        text = f"{text} {next(extra)}"
    return text[:high]


@dataclass
class Texts:
    users: list[str]
    replies: list[str]
    _i: int = 0

    def next_pair(self) -> tuple[str, str]:
        self._i += 1
        return self.pair(self._i - 1)

    def pair(self, i: int) -> tuple[str, str]:
        """The i-th (user, reply) pair, cycling (negative i counts from the end)."""
        return self.users[i % len(self.users)], self.replies[i % len(self.replies)]

    def user(self) -> str:
        return self.next_pair()[0]

    @property
    def mean_chars(self) -> float:
        return (sum(map(len, self.users)) + sum(map(len, self.replies))) / (len(self.users) + len(self.replies))


def texts() -> Texts:
    """Turn texts of 60–200 characters mixing Chinese and English, read from shared/data at run time."""
    cn, en = _load_pairs("memory_bank_cn.json"), _load_pairs("memory_bank_en.json")
    if not cn or not en:
        log("MemoryBank data not found: using a small synthetic text pool")
        cn = [
            (f"我们走到第{i}个路口，你记得那盏灯吗？", f"记得。第{i}盏灯在雨里闪了三下，像是某种信号。")
            for i in range(50)
        ]
        en = [
            (f"Do you remember the lamp at corner {i}?", f"Yes, lamp {i} blinked three times in the rain.")
            for i in range(50)
        ]
    en_users = itertools.cycle([q for q, _ in en])
    en_replies = itertools.cycle([r for _, r in en])
    users, replies = [], []
    for i, (query, response) in enumerate(cn):
        # every third user line carries an English aside, every reply ends with one (mixed-language play)
        user = f"{query} {next(en_users)}" if i % 3 == 0 else query
        users.append(_fit(user, en_users))
        replies.append(_fit(f"{response} {next(en_replies)}", en_replies))
    return Texts(users, replies)


# --- the application ----------------------------------------------------------------------------


def sqlite_env(path: str | Path) -> dict[str, str]:
    """The event store exactly as `changji serve` configures it (its SQLite factory and settings)."""
    return {**Changji.env, **Settings(data_dir=Path(path).parent).event_store_env(), "SQLITE_DBNAME": str(path)}


def sqlite_app(path: str | Path) -> Changji:
    return Changji(env=sqlite_env(path))


SAMPLE_CARD = CardData(
    name="沈灯",
    description="{{char}}是雾港灯塔的守灯人，五十来岁，话少，记性极好。He keeps a logbook of every ship.",
    personality="沉默、温和、固执；对{{user}}有种说不清的照顾。",
    scenario="台风夜，{{user}}的船在雾港外触礁，被{{char}}救上灯塔。",
    first_mes="*灯塔的铁门被风撞得砰砰作响。* 把湿衣服脱了，炉子上有姜汤。你叫什么名字？",
    mes_example="<START>\n{{user}}: 灯为什么闪三下？\n{{char}}: 三下是平安，两下是有人没回来。",
    post_history_instructions="保持{{char}}的口吻，回复不超过三段。",
    tags=["灯塔", "悬疑", "slow-burn"],
)


CARD_SETTINGS: dict[str, Any] = {}  # overrides of the sample card's story settings (e.g. context_window)


def create_card_and_story(
    app: Changji, tenant: str = TENANT, title: str = "bench", settings: dict[str, Any] | None = None
) -> tuple[UUID, UUID, UUID]:
    """A card (story settings: CARD_SETTINGS, then `settings`) and a story started from it; returns
    (card id, story id, root node id)."""
    card_id, story_id, root_id = uuid4(), uuid4(), uuid4()
    chosen = {**CARD_SETTINGS, **(settings or {})}
    app.cards.create_card(card_id, tenant, SAMPLE_CARD, StorySettings(user_name=USER_NAME, **chosen))
    app.stories.start_story(story_id, root_id, tenant, card_id, 0, title, {})
    return card_id, story_id, root_id


@dataclass
class Built:
    """What `build_story` made and how long its appends took."""

    card_id: UUID
    story_id: UUID
    root_id: UUID
    tip_id: UUID  # the main path's last reply (the story's leaf after the build)
    turns: int
    appends: int = 0
    append_seconds: float = 0.0
    wall_seconds: float = 0.0
    append_times: list[float] = field(default_factory=list)  # seconds per append, in order
    regenerates: int = 0
    side_branches: int = 0

    @property
    def append_events_per_s(self) -> float:
        return 2 * self.appends / self.append_seconds if self.append_seconds else float("nan")

    def window_events_per_s(self, start: float, stop: float) -> float:
        """Append events/s over a slice of the build (fractions 0..1 of the appends, in order)."""
        times = self.append_times[int(start * len(self.append_times)) : int(stop * len(self.append_times))]
        return 2 * len(times) / sum(times) if times else float("nan")


def build_story(
    app: Changji,
    turns: int,
    pool: Texts,
    *,
    tenant: str = TENANT,
    regenerate_every: int = 50,
    branch_every: int = 500,
    branch_back: int = 10,
    branch_turns: int = 3,
    label: str = "",
    compact: bool = False,
    settings: dict[str, Any] | None = None,
) -> Built:
    """A story of `turns` turns on the main path, plus a regenerated reply every `regenerate_every` turns
    (the leaf follows the new sibling, as after a swipe) and, every `branch_every` turns, a side branch of
    `branch_turns` turns started `branch_back` turns back, after which the leaf is checked out back to the
    main tip. Every node goes through `Changji.stories.append_node` with an explicit parent.

    Texts are chosen by distance from the end of the story, so the last turns of stories of any length
    (the context window) hold the same texts and ratios between sizes compare equal windows.

    `compact`: the story is compacted as it grows, as a served story is: whenever a reply announces a
    compaction, the offline summarizer runs it there and then (`compact_now`), so the story ends with
    its episodes and digest in place and no compaction due. `settings`: the card's story settings."""
    card_id, story_id, root_id = create_card_and_story(app, tenant, f"bench {turns}", settings)
    built = Built(card_id, story_id, root_id, root_id, turns)
    clock = time.perf_counter

    def append(kind: str, text: str, parent: UUID) -> UUID:
        t0 = clock()
        view = app.stories.append_node(tenant, story_id, uuid4(), kind, text, parent).node  # type: ignore[arg-type]
        dt = clock() - t0
        if compact and kind == "reply" and app.node_aggregate(view.id).jobs.get("compact") == "pending":
            compact_now(app, view.id)
        built.append_times.append(dt)
        built.append_seconds += dt
        built.appends += 1
        return view.id

    recent: deque[UUID] = deque(maxlen=branch_back)
    tip = root_id
    started = clock()
    step = max(turns // 10, 1)
    for turn in range(1, turns + 1):
        user_text, reply_text = pool.pair(turn - turns)
        user = append("user", user_text, tip)
        tip = append("reply", reply_text, user)
        if regenerate_every and turn % regenerate_every == 0:
            tip = append("reply", pool.pair(turn - turns + 101)[1], user)
            built.regenerates += 1
        if branch_every and turn % branch_every == 0 and len(recent) == branch_back:
            side = recent[0]
            for k in range(branch_turns):
                u, r = pool.pair(turn + 37 * (k + 1))
                side = append("reply", r, append("user", u, side))
            app.stories.move_leaf(tenant, story_id, tip)  # back to the main path (a checkout)
            built.side_branches += 1
        recent.append(tip)
        if turn % step == 0:
            elapsed = clock() - started
            log(f"  {label}built {turn}/{turns} turns, {built.appends} appends, "
                f"{built.append_events_per_s:,.0f} events/s, {elapsed:.1f}s")  # fmt: skip
    built.tip_id = tip
    built.wall_seconds = clock() - started
    return built


def compact_now(app: Changji, node_id: UUID) -> None:
    """Run the compaction a reply announced, with the offline summarizer, and settle its job."""
    import asyncio

    from schedulers.outcomes import Failed
    from schedulers.workers.compaction import CompactWorker, Inline

    done = asyncio.run(CompactWorker(app, Inline(), None).compact(node_id, False, node_id))
    if isinstance(done, Failed):
        raise RuntimeError(f"compaction at {node_id} failed: {done}")
    app.jobs.finish_job(node_id, "compact", done.detail)


_WORD = re.compile(r"[a-z0-9]+")
_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def content_words(text: str) -> frozenset[str]:
    """Lowercased ASCII alphanumeric words of 4+ characters, and bigrams of consecutive CJK characters."""
    words = {w for w in _WORD.findall(text.lower()) if len(w) >= 4}
    for run in _HAN_RUN.findall(text):
        words.update(run[i : i + 2] for i in range(len(run) - 1))
    return frozenset(words)


# --- LoCoMo (shared/data/locomo, CC BY-NC 4.0: read at run time, never copied) -------------------

LOCOMO_PATHS = (
    Path(os.environ.get("CHANGJI_SHARED", REPO.parent / "shared")) / "data" / "locomo" / "locomo10.json",
    Path("/work/shared/data/locomo/locomo10.json"),
)
LOCOMO_CATEGORIES = {1: "multi_hop", 2: "temporal", 3: "open_domain", 4: "single_hop", 5: "adversarial"}
_DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


@dataclass(frozen=True, slots=True)
class LocomoMessage:
    dia_id: str
    speaker: str
    text: str  # with the shared image's caption, as a reader of the chat would see it
    session: int


@dataclass(frozen=True, slots=True)
class LocomoQuestion:
    question: str
    category: int
    evidence: tuple[str, ...]  # normalised dia ids that resolve to a message of the conversation
    answer: str = ""  # LoCoMo's answer text (empty for the adversarial questions, which have none)


@dataclass(frozen=True, slots=True)
class LocomoConversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    messages: tuple[LocomoMessage, ...]
    questions: tuple[LocomoQuestion, ...]


def locomo(limit: int | None = None, cut: int | None = None) -> list[LocomoConversation]:
    """LoCoMo's conversations in order (the first `limit`), questions with their resolvable evidence;
    questions whose evidence resolves to nothing are left out. Empty when the data is not there.
    `cut`: each conversation ends after its first `cut` messages, its questions the ones whose evidence
    all lies in them."""
    path = next((p for p in LOCOMO_PATHS if p.exists()), None)
    if path is None:
        log("LoCoMo not found (shared/data/locomo/locomo10.json)")
        return []
    out = []
    for sample in json.loads(path.read_text("utf-8"))[:limit]:
        conversation = sample["conversation"]
        sessions = sorted(
            (k for k in conversation if re.fullmatch(r"session_\d+", k) and isinstance(conversation[k], list)),
            key=lambda k: int(k.split("_")[1]),
        )
        messages = []
        for key in sessions:
            for m in conversation[key]:
                text = m["text"] + (f" [shares a photo: {m['blip_caption']}]" if m.get("blip_caption") else "")
                messages.append(LocomoMessage(_dia(m["dia_id"]), m["speaker"], text, int(key.split("_")[1])))
        known = {m.dia_id for m in messages}
        kept = {m.dia_id for m in messages[:cut]}
        questions = []
        for item in sample["qa"]:
            evidence = tuple(
                dict.fromkeys(d for raw in item.get("evidence", []) for d in _dias(str(raw)) if d in known)
            )
            if evidence and kept.issuperset(evidence):
                answer = str(item.get("answer", "")).strip()
                questions.append(LocomoQuestion(item["question"], int(item["category"]), evidence, answer))
        out.append(
            LocomoConversation(
                sample["sample_id"], conversation["speaker_a"], conversation["speaker_b"], tuple(messages[:cut]),
                tuple(questions),
            )
        )  # fmt: skip
    return out


def _dias(raw: str) -> list[str]:
    return [f"D{int(s)}:{int(t)}" for s, t in _DIA_ID.findall(raw)]


def _dia(raw: str) -> str:
    found = _dias(raw)
    return found[0] if found else raw
