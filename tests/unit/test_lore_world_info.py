"""World Info's rules beyond keys, table-tested as SillyTavern documents them: probability with seeded draws,
inclusion groups, recursion flags, delay, the minimum of activations and the token budget — each case on a
book of its own making and on the real lorebooks in shared/data/cards (SillyTavern's Eldoria World Info file,
Seraphina's card book) and a Chinese one written here."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.card.lore import WI_TO_CARD_EXT, LoreBookView, LoreEntry, LoreScan, extras_of
from domain.card.rules.lore import LoreBudget, LoreTurn, activate, draw
from domain.card.rules.lore_activation import _Activation
from domain.card.rules.lore_timers import PastTurn, durations, timed_turn
from interchange.lorebooks import character_book_entries, read_lorebook
from tests.shared_data import cards_dir

CHAR, USER = "Seraphina", "Alice"

# each book: its four entries and a word that fires each (in the entries' order)
Book = tuple[str, LoreScan, tuple[LoreEntry, ...], tuple[str, ...], bool]  # (+ whether it is World Info spelled)

ZH = (
    LoreEntry(uid=0, keys=("森林", "埃尔多利亚"), title="森林", content="埃尔多利亚是一片有魔力的森林。"),
    LoreEntry(uid=1, keys=("影牙", "怪兽"), title="影牙", content="影牙是潜伏在林中的怪兽。"),
    LoreEntry(uid=2, keys=("林间空地", "避难所"), title="空地", content="林间空地是塞拉菲娜守护的避难所。"),
    LoreEntry(uid=3, keys=("魔法", "力量"), title="魔法", content="塞拉菲娜的魔法来自森林。"),
)


def _books() -> dict[str, Book]:
    eldoria = read_lorebook(json.loads((cards_dir() / "Eldoria.json").read_text(encoding="utf-8")), name="Eldoria")
    card = json.loads((cards_dir() / "default_Seraphina.card.json").read_text(encoding="utf-8"))
    seraphina = character_book_entries(card["data"]["character_book"])
    english = ("forest", "monster", "glade", "magic")
    return {
        "eldoria": ("eldoria", eldoria.scan, tuple(eldoria.entries), english, True),
        "seraphina": ("seraphina", seraphina.scan, tuple(seraphina.entries), english, False),
        "zh": ("zh", LoreScan(), ZH, ("森林", "怪兽", "林间空地", "魔法"), True),
    }


BOOKS = _books()
SOURCES = list(BOOKS)


def shaped(
    source: str, changes: dict[int, dict[str, Any]], recursive: bool = False
) -> tuple[LoreBookView, tuple[str, ...]]:
    """The source's book with World Info fields set on some of its entries (spelled as the source spells
    them), and its trigger words. A recursive book's entries say nothing of each other but what `changes`
    make them say (the real ones name each other's keys)."""
    book_id, scan, entries, words, world_info = BOOKS[source]
    out = []
    for entry in entries:
        fields = dict(changes.get(entry.uid, {}))
        content = fields.pop("content", f"entry {entry.uid}" if recursive else entry.content)
        order = fields.pop("order", entry.order)
        ext = {(k if world_info else WI_TO_CARD_EXT.get(k, k)): v for k, v in fields.items()}
        out.append(
            entry.model_copy(update={"extensions": {**entry.extensions, **ext}, "content": content, "order": order})
        )
    return LoreBookView(book_id, scan.model_copy(update={"recursive": recursive, "scan_depth": 2}), tuple(out)), words


def said(*words: str) -> list[str]:
    return [f"{USER}: " + " ".join(words)]


def kept(found: Any) -> list[int]:
    return [hit.entry.uid for hit in found.hits]


def run(book: LoreBookView, messages: list[str], **kwargs: Any) -> Any:
    return activate([book], messages, char=CHAR, user=USER, **kwargs)


# --- probability -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(("chance", "kept_share"), [(0, (0.0, 0.0)), (50, (0.4, 0.6)), (100, (1.0, 1.0))])
def test_probability_0_50_100_over_fixed_seeds(source: str, chance: int, kept_share: tuple[float, float]) -> None:
    book, words = shaped(source, {0: {"probability": chance, "useProbability": True}})
    outcomes = [0 in kept(run(book, said(words[0]), turn=LoreTurn(seed=f"node-{i}"))) for i in range(200)]
    low, high = kept_share
    assert low <= sum(outcomes) / len(outcomes) <= high
    found = run(book, said(words[0]), turn=LoreTurn(seed="node-7"))
    if chance == 100:
        assert found.left_out == () and found.hits[0].roll is None  # (no draw where it cannot fail)
    else:
        roll = draw("node-7", f"{book.book_id}\x1f0")
        assert (0 in kept(found)) == (roll < chance)
        (hit,) = found.hits or found.left_out
        assert hit.roll == roll and (hit.left_out == "probability") == (roll >= chance)


def test_the_same_node_draws_the_same_and_another_node_draws_afresh() -> None:
    book, words = shaped("eldoria", {0: {"probability": 50}})
    again = [kept(run(book, said(words[0]), turn=LoreTurn(seed="one"))) for _ in range(5)]
    assert len({tuple(k) for k in again}) == 1  # a regenerate at the same node: the same draw
    draws = {draw(f"node-{i}", "eldoria\x1f0") for i in range(50)}
    assert len(draws) == 50 and all(0 <= d < 100 for d in draws)


def test_use_probability_off_makes_the_probability_count_for_nothing() -> None:
    book, words = shaped("eldoria", {0: {"probability": 0, "useProbability": False}})
    assert kept(run(book, said(words[0]), turn=LoreTurn(seed="x"))) == [0]
    assert extras_of(book.entries[0]).chance == 100


# --- inclusion groups -----------------------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_one_entry_of_a_group_by_weight(source: str) -> None:
    book, words = shaped(
        source, {0: {"group": "weather", "groupWeight": 100}, 1: {"group": "weather", "groupWeight": 0}}
    )
    for i in range(30):
        found = run(book, said(words[0], words[1]), turn=LoreTurn(seed=f"n{i}"))
        assert kept(found) == [0]
        assert [(h.entry.uid, h.left_out, h.group) for h in found.left_out] == [(1, "group", "weather")]


@pytest.mark.parametrize("source", SOURCES)
def test_equal_weights_share_the_wins(source: str) -> None:
    book, words = shaped(source, {0: {"group": "g"}, 1: {"group": "g"}, 2: {"group": "g"}})
    wins = [kept(run(book, said(*words[:3]), turn=LoreTurn(seed=f"s{i}"))) for i in range(300)]
    assert all(len(w) == 1 for w in wins)
    counts = [sum(w == [uid] for w in wins) for uid in range(3)]
    assert all(70 <= c <= 130 for c in counts), counts


@pytest.mark.parametrize("source", SOURCES)
def test_group_override_takes_the_highest_order(source: str) -> None:
    book, words = shaped(
        source,
        {
            0: {"group": "g", "groupOverride": True, "order": 10},
            1: {"group": "g", "groupOverride": True, "order": 90},
            2: {"group": "g", "groupWeight": 1000, "order": 200},
        },
    )
    for i in range(10):
        assert kept(run(book, said(*words[:3]), turn=LoreTurn(seed=str(i)))) == [1]


def test_a_group_that_has_an_entry_in_already_takes_no_more() -> None:
    book, words = shaped(
        "eldoria", {0: {"group": "g", "content": "the glade waits"}, 2: {"group": "g"}}, recursive=True
    )
    found = run(book, said(words[0]), turn=LoreTurn(seed="a"))
    assert kept(found) == [0]  # the glade, named by the forest's content, would come by recursion: its group is full
    assert [(h.entry.uid, h.left_out) for h in found.left_out] == [(2, "group")]


def test_an_entry_in_two_groups_and_the_groups_separated_by_commas() -> None:
    book, words = shaped("zh", {0: {"group": "天气, 地点"}, 1: {"group": "天气"}, 2: {"group": "地点"}})
    assert extras_of(book.entries[0]).groups == ("天气", "地点")
    for i in range(20):
        found = run(book, said(*words[:3]), turn=LoreTurn(seed=str(i)))
        won = kept(found)
        assert won in ([0], [1, 2], [1], [2])  # each group has one entry at most
        assert len(won) + len(found.left_out) == 3


# --- recursion flags ------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_prevent_recursion_keeps_an_entrys_content_out_of_the_buffer(source: str) -> None:
    _, _, _, words, _ = BOOKS[source]
    feeds = {0: {"content": f"see {words[1]}"}}
    book, _ = shaped(source, feeds, recursive=True)
    assert kept(run(book, said(words[0]))) == [0, 1]
    book, _ = shaped(source, {0: {**feeds[0], "preventRecursion": True}}, recursive=True)
    assert kept(run(book, said(words[0]))) == [0]


@pytest.mark.parametrize("source", SOURCES)
def test_exclude_recursion_fires_on_the_messages_only(source: str) -> None:
    _, _, _, words, _ = BOOKS[source]
    book, _ = shaped(source, {0: {"content": f"see {words[1]}"}, 1: {"excludeRecursion": True}}, recursive=True)
    assert kept(run(book, said(words[0]))) == [0]  # named by the content only: not fired
    assert kept(run(book, said(words[0], words[1]))) == [0, 1]  # named in the messages


@pytest.mark.parametrize("source", SOURCES)
def test_delay_until_recursion_waits_for_its_stage(source: str) -> None:
    """SillyTavern's stages: entries delayed until recursion take part in recursion passes only, those of a
    later stage once no pass would follow; a pass for the next stage comes even where the book does not
    recurse (and takes the earlier stages' entries with it)."""
    _, _, _, words, _ = BOOKS[source]
    changes = {0: {"content": f"see {words[3]}"}, 1: {"delayUntilRecursion": True}, 2: {"delayUntilRecursion": 2}}
    book, _ = shaped(source, changes, recursive=False)
    found = run(book, said(words[1], words[2]))  # no recursion: one forced pass for stage 2, stage 1 with it
    assert sorted((h.entry.uid, h.recursion) for h in found.hits) == [(1, 1), (2, 1)]
    book, _ = shaped(source, changes, recursive=True)
    found = run(book, said(words[0], words[1], words[2]))  # the forest's content recurses: stage 1 first
    assert sorted((h.entry.uid, h.recursion) for h in found.hits) == [(0, 0), (1, 1), (2, 3), (3, 1)]  # (pass 2: none)
    assert kept(run(book, said(words[1]))) == [1]  # nothing recursed: the pass forced for stage 2 takes it
    only_first = run(book, said(words[0]))
    assert kept(only_first) == [0, 3]


# --- delay and the minimum of activations ---------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(("messages", "fires"), [(3, False), (4, False), (5, True), (40, True)])
def test_delay_counts_the_chats_messages(source: str, messages: int, fires: bool) -> None:
    book, words = shaped(source, {0: {"delay": 5}})
    found = run(book, said(words[0]), turn=LoreTurn(messages=messages))
    assert kept(found) == ([0] if fires else [])
    assert [h.left_out for h in found.left_out] == ([] if fires else ["delay"])


@pytest.mark.parametrize("source", SOURCES)
def test_the_minimum_of_activations_scans_deeper(source: str) -> None:
    book, words = shaped(source, {})
    older = [f"{USER}: {words[2]}", f"{CHAR}: …", f"{USER}: …", f"{CHAR}: …"]  # the glade, 4 messages back
    assert kept(run(book, older)) == []  # (the book scans 2)
    assert kept(run(book, older, turn=LoreTurn(min_activations=1))) == [2]
    assert kept(run(book, older, turn=LoreTurn(min_activations=1, min_depth=3))) == []  # not that deep
    assert kept(run(book, [*older, f"{USER}: {words[3]}"], turn=LoreTurn(min_activations=1))) == [3]  # one is enough


# --- the budget on the real books -----------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_the_budget_keeps_the_newest_named_then_the_higher_order(source: str) -> None:
    book, words = shaped(source, {1: {"order": 150}})
    cost: Callable[[LoreEntry], int] = lambda _: 10  # noqa: E731
    messages = [f"{USER}: {words[0]} {words[1]}", f"{CHAR}: …", f"{USER}: {words[2]}"]
    found = run(LoreBookView(book.book_id, book.scan.model_copy(update={"scan_depth": 3}), book.entries), messages,
                budget=LoreBudget(20, cost))  # fmt: skip
    assert kept(found) == [2, 1]  # the newest named; then the higher order; by order in the prompt
    assert [(h.entry.uid, h.left_out) for h in found.left_out] == [(0, "budget")]
    assert found.tokens == 20


# --- timed effects: sticky, cooldown and delay over several turns --------------------------------------


def played(book: LoreBookView, words: list[str], uid: int = 0, signature: object | None = None) -> list[str]:
    """Each turn of a chat (the greeting, then user words and a reply a turn: the user's words of turn t at
    message 2t) as the context sees the entry `uid`: "in" by its keys, "sticky", or why it is out ("-": its
    keys did not fire). `signature`: the folds' (a new one, none kept, unless given)."""
    signature = object() if signature is None else signature
    chat = [f"{CHAR}: the greeting"]
    past: list[PastTurn] = []
    timed = durations([book])
    out = []
    for t, said_now in enumerate(words, 1):
        chat.append(f"{USER}: {said_now}")
        seed = f"turn {t}"

        def run(messages: Any, turn: LoreTurn) -> Any:
            return activate([book], messages, char=CHAR, user=USER, turn=turn)

        turn = timed_turn(LoreTurn(seed=seed, messages=len(chat)), past, timed, run, signature)
        found = run(chat[-book.scan.scan_depth :], turn)
        hit = next((h for h in (*found.hits, *found.left_out) if h.entry.uid == uid), None)
        out.append("-" if hit is None else hit.left_out or ("sticky" if hit.sticky else "in"))
        past.append(PastTurn(seed, len(chat), tuple(chat[-book.scan.scan_depth :])))
        chat.append(f"{CHAR}: …")
    return out


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(
    ("fields", "named", "seen"),
    [
        ({"sticky": 3}, [1, 0, 0], ["in", "sticky", "-"]),  # 3 messages: the next turn, not the one after
        ({"sticky": 2}, [1, 0], ["in", "-"]),  # 2 messages end before the next user's words
        ({"sticky": 5}, [1, 0, 0, 0], ["in", "sticky", "sticky", "-"]),
        ({"cooldown": 4}, [1, 1, 1, 1, 1], ["in", "cooldown", "in", "cooldown", "in"]),
        ({"sticky": 3, "cooldown": 4}, [1] * 7, ["in", "sticky", "cooldown", "cooldown", "in", "sticky", "cooldown"]),
        ({"delay": 5}, [1, 1, 1], ["delay", "delay", "in"]),
    ],
)
def test_timed_effects_over_several_turns(
    source: str, fields: dict[str, int], named: list[int], seen: list[str]
) -> None:
    book, words = shaped(source, {0: fields})
    book = LoreBookView(book.book_id, book.scan.model_copy(update={"scan_depth": 1}), book.entries)
    chat = [words[0] if n else "nothing here" for n in named]
    assert played(book, chat) == seen


def test_a_sticky_entry_wins_its_group_and_skips_its_draw() -> None:
    book, words = shaped(
        "eldoria", {0: {"sticky": 3, "group": "g", "probability": 0, "useProbability": False}, 1: {"group": "g"}}
    )
    book = LoreBookView(book.book_id, book.scan.model_copy(update={"scan_depth": 1}), book.entries)
    assert played(book, [words[0], words[1]]) == ["in", "sticky"]
    assert played(book, [words[0], words[1]], uid=1) == ["-", "group"]


def test_a_turn_read_again_sees_the_same_timers_and_another_start_folds_the_same() -> None:
    book, words = shaped("zh", {0: {"sticky": 3, "cooldown": 4}})
    book = LoreBookView(book.book_id, book.scan.model_copy(update={"scan_depth": 1}), book.entries)
    chat = [words[0]] * 9
    kept = object()
    first = played(book, chat, signature=kept)
    assert played(book, chat, signature=kept) == first  # the folds kept by the first run give a fresh fold's
    assert (
        played(book, chat)
        == first
        == ["in", "sticky", "cooldown", "cooldown", "in", "sticky", "cooldown", "cooldown", "in"]
    )


WORDS = ("reef", "fog", "tide", "gull", "mast", "Straße", "雾", "灯塔")


def step_by_step(run: Any, skew: int) -> int | None:
    """The minimum of activations one message deeper at a time, while any pending entry can go deeper."""
    messages = len(run.texts.messages)
    limit = min(run.turn.min_depth or messages, messages)
    deeper = [c.book.scan.scan_depth + skew + 1 for c in run.pending if c.entry.scan_depth is None]
    return skew + 1 if deeper and min(deeper) <= limit else None


def both_ways(book: LoreBookView, messages: list[str], turn: LoreTurn) -> tuple[list[int], list[int]]:
    """The kept hits with the minimum's shortcut, and going one message deeper at a time."""
    fast = [h.entry.uid for h in run(book, messages, turn=turn).hits]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Activation, "_deeper", step_by_step)
        patch.setattr(_Activation, "_deeper_text", lambda *_: True)
        return fast, [h.entry.uid for h in run(book, messages, turn=turn).hits]


def test_the_minimums_shortcut_counts_folded_text_where_folding_makes_it_longer() -> None:
    book = LoreBookView("b", LoreScan(scan_depth=1), [LoreEntry(uid=0, keys=("dragon",), content="d")])
    fast, slow = both_ways(
        book, [f"{USER}: " + "Straße " * 10 + "dragon", f"{USER}: hello"], LoreTurn(min_activations=1)
    )
    assert fast == slow == [0]


def test_delayed_stages_come_once_and_the_minimums_recursion_passes_take_them_deeper() -> None:
    """SillyTavern's stages are passed once: later, an entry delayed until recursion comes in a recursion pass
    that the minimum's deeper passes start, at their depth."""
    entries = [
        LoreEntry(uid=1, keys=("zzz",), content="z", extensions={"delayUntilRecursion": 1}),
        LoreEntry(uid=2, keys=("wolf",), content="w", extensions={"delayUntilRecursion": 2}),
        LoreEntry(uid=3, keys=("moon",), content="m"),
    ]
    book = LoreBookView("b", LoreScan(scan_depth=1, recursive=True), entries)
    messages = [f"{USER}: moon", f"{USER}: wolf", f"{USER}: a", f"{USER}: b"]
    fast, slow = both_ways(book, messages, LoreTurn(min_activations=1))
    assert fast == slow == [2, 3]  # the moon, four back, and the wolf in the recursion pass it starts
    fast, slow = both_ways(book, [*messages[1::-1], *messages[2:]], LoreTurn(min_activations=1))
    assert fast == slow == [3]  # the moon three back is enough: the wolf, four back, is not reached


@settings(max_examples=300, deadline=None)
@given(
    entries=st.lists(
        st.tuples(
            st.lists(st.sampled_from(WORDS), min_size=1, max_size=2),
            st.lists(st.sampled_from(WORDS), max_size=2),
            st.sampled_from(["and_any", "not_all", "not_any", "and_all"]),
            st.one_of(st.none(), st.integers(0, 6)),
            st.booleans(),
            st.sampled_from([0, 0, 0, 1, 2]),
            st.booleans(),
        ),
        min_size=1,
        max_size=6,
    ),
    said=st.lists(st.lists(st.sampled_from((*WORDS, "calm", "STRASSE")), max_size=3), min_size=1, max_size=12),
    wanted=st.integers(1, 5),
    depth=st.integers(0, 3),
    limit=st.integers(0, 14),
    recursive=st.booleans(),
)
def test_the_minimum_of_activations_fires_what_going_one_message_deeper_at_a_time_fires(
    entries: list[tuple[list[str], list[str], str, int | None, bool, int, bool]],
    said: list[list[str]],
    wanted: int,
    depth: int,
    limit: int,
    recursive: bool,
) -> None:
    """The passes of the minimum go straight to the next depth whose text may fire an entry: what they fire is
    what going one message deeper at a time fires (recursion, delayed stages, case folding included)."""
    lore = [
        LoreEntry(
            uid=i, keys=tuple(f"/{k}/" if regex else k for k in keys), secondary_keys=tuple(secondary), logic=logic,
            scan_depth=own, content=f"entry {i} {' '.join(keys)}", case_sensitive=sensitive,
            extensions={"delayUntilRecursion": stage} if stage else {},
        )
        for i, (keys, secondary, logic, own, regex, stage, sensitive) in enumerate(entries)
    ]  # fmt: skip
    messages = [f"{USER}: " + " ".join(words) for words in said]
    book = LoreBookView("b", LoreScan(scan_depth=depth, recursive=recursive), lore)
    turn = LoreTurn(min_activations=wanted, min_depth=limit)
    fast, slow = both_ways(book, messages, turn)
    assert fast == slow, (entries, said, wanted, depth, limit, recursive)


@pytest.mark.parametrize("source", SOURCES)
def test_group_scoring_keeps_the_members_that_match_the_most_keys(source: str) -> None:
    _, _, entries, words, _ = BOOKS[source]
    second = next(k for k in entries[1].keys if k != words[1])  # (another of the monster's keys)
    book, _ = shaped(source, {0: {"group": "g", "useGroupScoring": True}, 1: {"group": "g", "useGroupScoring": True}})
    for i in range(20):  # the monster matches two of its keys, the forest one: the monster always
        found = run(book, said(words[0], words[1], second), turn=LoreTurn(seed=str(i)))
        assert kept(found) == [1] and [(h.entry.uid, h.left_out) for h in found.left_out] == [(0, "group")]
    unscored, _ = shaped(source, {0: {"group": "g"}, 1: {"group": "g"}})
    wins = {tuple(kept(run(unscored, said(words[0], words[1], second), turn=LoreTurn(seed=str(i))))) for i in range(40)}
    assert wins == {(0,), (1,)}  # (without scoring, the draw decides)
