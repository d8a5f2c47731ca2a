"""Drift signals at one reply (`domain/tree/rules/drift.py`) and over a path (`projections/context/drift.py`),
and the re-anchoring block: replies that must fire each signal and replies that must not, in English and Chinese."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from uuid import UUID, uuid4

import pytest

from domain.card.anchor import ANCHOR_TEXTS
from domain.language import Language
from domain.tree.rules.drift import (
    FORCE_EVERY,
    RECENT,
    RUN_MOST,
    SIGNALS,
    Exchange,
    Signal,
    Thresholds,
    banned,
    creep,
    echo,
    forced,
    language_switch,
    repeat,
    reply_length,
    signals_at,
)
from domain.values import NodeKind, NodeView, StorySettings
from projections.context.drift import NO_DRIFT, DriftAt, DriftCache, drift_at, early_lengths, reanchor_block

DEFAULT = Thresholds.of(StorySettings())
EN_BASES = (
    "The rain stopped before dawn and the harbor smelled of salt and tar.",
    "Mara counted the coins twice, then slid them across the wooden counter.",
    "A gull landed on the railing, watching the fishermen mend their nets.",
    "Somewhere below deck a lantern swung, throwing shadows over the crates.",
    "The captain laughed at the joke and poured another cup of strong tea.",
)
ZH_BASES = (
    "雨在黎明前停了，港口里弥漫着盐和焦油的气味。",
    "玛拉把硬币数了两遍，然后推到木柜台的另一边。",
    "一只海鸥落在栏杆上，看着渔夫们修补渔网。",
    "甲板下面有一盏灯笼在摇晃，把影子投在木箱上。",
    "船长听了笑话哈哈大笑，又倒了一杯浓茶。",
)
TIC_EN = "she tilts her head with a slow knowing smile tonight"  # 10 words
TIC_ZH = "她轻轻歪了歪头，眼里闪过一丝狡黠的光芒"
ZH_LONG = "她把斗篷裹紧了一些，沿着石阶慢慢走下去，一边回头看你有没有跟上。"
EN_LONG = "She pulls the cloak tighter and walks slowly down the stone steps, glancing back to see whether you follow."
EN_WORDS = "I think we should leave the city before the guards close the northern gate tonight"
ZH_WORDS = "我觉得我们应该在守卫关闭北门之前离开这座城市"


def exchanges(replies: Sequence[str], words: Sequence[str] = (), first_turn: int = 11) -> list[Exchange]:
    said = list(words) + [""] * (len(replies) - len(words))
    return [Exchange(UUID(int=i + 1), first_turn + i, said[i], r) for i, r in enumerate(replies)]


def test_default_thresholds_come_from_the_story_settings() -> None:
    assert Thresholds(2.2, 2, 0.6, 0.6, ()) == DEFAULT
    assert signals_at([], [100] * 10, "en", DEFAULT) == ()
    assert tuple(s.name for s in signals_at(exchanges(EN_BASES), [70] * 10, "en", DEFAULT)) == SIGNALS


@pytest.mark.parametrize(
    ("early", "lengths", "first_turn", "fires", "value"),
    [
        ([100] * 10, [120, 180, 240, 300, 330], 11, True, 3.0),  # grows steadily to 3x the early median
        ([100] * 10, [100, 150, 200, 220, 240], 11, True, 2.2),  # exactly at the threshold
        ([100] * 10, [100, 150, 200, 219, 240], 11, False, 2.19),  # just under it
        ([100] * 10, [100, 100, 100, 100, 400], 11, False, 1.0),  # one long answer among normal ones
        ([100] * 10, [300, 320, 290, 310, 300], 11, False, 3.0),  # long answers, but not rising
        ([300] * 10, [300, 320, 340, 360, 380], 11, False, 1.2),  # long from the start: no growth vs early
        ([100] * 4, [120, 180, 240, 300, 330], 11, False, 0.0),  # fewer than 5 early replies: not judged
        ([100] * 10, [120, 180, 240, 300, 330], 5, False, 0.0),  # still among the early replies
        ([100] * 10, [240, 300, 330], 11, False, 0.0),  # fewer than 4 replies to see a rise in
    ],
)
@pytest.mark.parametrize("char", ["x", "字"])
def test_creep(early: list[int], lengths: list[int], first_turn: int, fires: bool, value: float, char: str) -> None:
    signal = creep(exchanges([char * n for n in lengths], first_turn=first_turn), early, DEFAULT.creep)
    assert (signal.fired, signal.value) == (fires, value)
    assert signal.evidence == str(early[0]) if value else signal.detail.startswith("not judged")


@pytest.mark.parametrize(
    ("language", "replies", "words", "threshold", "fires", "evidence"),
    [
        ("en", [*EN_BASES[:2], *(f"{b} {TIC_EN}" for b in EN_BASES[2:])], (), 2, True, TIC_EN),  # last 3 of 5
        ("en", [f"{b} {TIC_EN}" if i in (0, 2, 4) else b for i, b in enumerate(EN_BASES)], (), 2, True, TIC_EN),
        ("en", [*EN_BASES[:3], *(f"{b} {TIC_EN}" for b in EN_BASES[3:])], (), 2, False, ""),  # only 2 replies
        ("en", [*(f"{b} {TIC_EN}" for b in EN_BASES[:3]), *EN_BASES[3:]], (), 2, False, ""),  # not in the newest
        ("en", [*EN_BASES[:2], *(f"{b} {TIC_EN}" for b in EN_BASES[2:])], ("", f"Me: {TIC_EN}!"), 2, False, ""),
        ("en", [f"{b} slow knowing smile tonight" for b in EN_BASES], (), 2, False, ""),  # 4 words: no phrase
        ("en", [f"{b} a slow knowing smile tonight" for b in EN_BASES], (), 2, False, ""),  # one 5-word phrase
        ("en", [f"{b} a slow knowing smile tonight" for b in EN_BASES], (), 1, True, "a slow knowing smile tonight"),
        ("zh", [*ZH_BASES[:2], *(f"{b}{TIC_ZH}" for b in ZH_BASES[2:])], (), 2, True, TIC_ZH.replace("，", "")),
        ("zh", [*ZH_BASES[:3], *(f"{b}{TIC_ZH}" for b in ZH_BASES[3:])], (), 2, False, ""),
        ("zh", [*ZH_BASES[:2], *(f"{b}{TIC_ZH}" for b in ZH_BASES[2:])], ("", "", "", TIC_ZH), 2, False, ""),
        ("zh", [f"{b}她歪了歪头笑着说" for b in ZH_BASES], (), 1, True, "她歪了歪头笑着说"),  # 8 characters
        ("zh", [f"{b}她歪了歪头笑着说" for b in ZH_BASES], (), 2, False, ""),  # ... one phrase only
        ("zh", [f"{b}她歪了歪头笑着" for b in ZH_BASES], (), 1, False, ""),  # 7 characters: no phrase
        ("zh", list(ZH_BASES), (), 1, False, ""),
    ],
)
def test_repeat(
    language: Language, replies: list[str], words: tuple[str, ...], threshold: int, fires: bool, evidence: str
) -> None:
    signal = repeat(exchanges(replies, words), language, threshold)
    assert signal.fired is fires
    if fires:
        assert signal.evidence == evidence
    else:
        assert signal.value < threshold


def test_repeat_looks_at_the_last_five_replies_only() -> None:
    replies = [f"{EN_BASES[0]} {TIC_EN}", f"{EN_BASES[1]} {TIC_EN}", *EN_BASES[2:], f"Finally, {TIC_EN}"]
    assert repeat(exchanges(replies), "en", 2).value == 0  # the two older ones fell out of the window


@pytest.mark.parametrize(
    ("language", "replies", "fires", "detail"),
    [
        ("zh", [ZH_LONG, ZH_LONG, ZH_LONG, EN_LONG, EN_LONG], True, "100%"),  # the last two in English
        ("zh", [ZH_LONG, ZH_LONG, ZH_LONG, ZH_LONG, EN_LONG], False, "0%"),  # only the last one: a quotation
        ("zh", [EN_LONG, EN_LONG, ZH_LONG, ZH_LONG], False, "0%"),  # came back
        ("zh", [ZH_LONG, f"{ZH_LONG} {EN_LONG}", f"{ZH_LONG} {EN_LONG}"], False, "%"),  # English quoted inside
        ("en", [EN_LONG, EN_LONG, ZH_LONG, ZH_LONG], True, "100%"),  # an English card answered in Chinese
        ("en", [EN_LONG, EN_LONG, EN_LONG], False, "0%"),
        ("zh", [ZH_LONG, "Okay, fine, I will go.", "Sure, see you soon."], False, "too few words"),  # < 12 tokens
        ("en", [EN_LONG, "好的，我走了。", "明天见。"], False, "too few words"),
        ("zh", [EN_LONG], False, "too few words"),  # one reply alone
    ],
)
def test_language_switch(language: Language, replies: list[str], fires: bool, detail: str) -> None:
    signal = language_switch(exchanges(replies), language, DEFAULT.language)
    assert (signal.fired, detail in signal.detail) == (fires, True)
    assert signal.replies == tuple(UUID(int=i + 1) for i in range(len(replies)))[-2:]
    if fires:
        assert signal.evidence == language


@pytest.mark.parametrize(
    ("language", "words", "reply", "value", "judged"),
    [
        ("en", EN_WORDS, "You think we should leave the city before the guards close the northern gate tonight?", 0.92, True),
        ("en", EN_WORDS, "Then pack light; we slip out through the tanners' quarter while the watch changes.", 0.0, True),
        ("en", EN_WORDS, "The northern gate? Nonsense, we stay.", 0.08, True),  # a few words quoted
        ("en", "Let's go now, shall we?", "Let's go now, shall we? Yes, let's go now.", 0.0, False),  # too short
        ("zh", ZH_WORDS, f"你说{ZH_WORDS}？", 1.0, True),
        ("zh", ZH_WORDS, f"北门？{ZH_WORDS[-4:]}可不容易。", 0.05, True),
        ("zh", ZH_WORDS, "那就轻装出发，趁着换岗的时候从皮匠街溜出去。", 0.0, True),
        ("zh", "我们走吧，好吗", "我们走吧，好吗？好，我们走吧。", 0.0, False),  # fewer than 12 characters
    ],
)  # fmt: skip
def test_echo(language: Language, words: str, reply: str, value: float, judged: bool) -> None:
    signal = echo(Exchange(uuid4(), 12, words, reply), language, DEFAULT.echo)
    assert (signal.value, signal.fired) == (value, value >= 0.6)
    assert ("too short" not in signal.detail) is judged


@pytest.mark.parametrize(
    ("patterns", "reply", "fires", "evidence", "detail"),
    [
        (("as an ai",), "As an AI, I cannot feel the wind.", True, "As an AI", "pattern 0 matched 'As an AI'"),
        ((r"作为一?个?\s*AI",), "作为AI，我无法感受到风。", True, "作为AI", "pattern 0 matched"),
        ((r"\bsmirk(s|ed)?\b", "gaze"), "He smirks. She SMIRKED back.", True, "smirks", "pattern 0 matched"),
        (("as an ai",), "The wind is cold tonight.", False, "", "none matched"),
        ((), "As an AI, I cannot feel the wind.", False, "", "no banned patterns"),
        (("(", "wind"), "The wind is cold tonight.", True, "wind", "pattern 1 matched 'wind'"),  # ( skipped
    ],
)
def test_banned(patterns: tuple[str, ...], reply: str, fires: bool, evidence: str, detail: str) -> None:
    signal = banned(Exchange(uuid4(), 3, "", reply), patterns)
    assert (signal.fired, signal.evidence, detail in signal.detail) == (fires, evidence, True)


def test_a_catastrophic_pattern_is_skipped_within_the_time_limit() -> None:
    started = time.perf_counter()
    slow = banned(Exchange(uuid4(), 3, "", "a" * 5000 + "b"), ("(a+)+$",))
    also = banned(Exchange(uuid4(), 3, "", "a" * 5000 + "b"), ("(a+)+$", "b$"))
    assert time.perf_counter() - started < 1.0
    assert not slow.fired and "took too long" in slow.detail
    assert also.fired and also.evidence == "b" and "pattern(s) 0 took too long" in also.detail


OFF: dict[str, Callable[[float], Signal]] = {
    "creep": lambda t: creep(exchanges(["x" * n for n in (120, 180, 240, 300, 330)]), [100] * 10, t),
    "repeat": lambda t: repeat(exchanges([f"{b} {TIC_EN}" for b in EN_BASES]), "en", int(t)),
    "language": lambda t: language_switch(exchanges([EN_LONG, EN_LONG]), "zh", t),
    "echo": lambda t: echo(Exchange(uuid4(), 12, EN_WORDS, EN_WORDS), "en", t),
}


@pytest.mark.parametrize("name", sorted(OFF))
def test_a_threshold_of_zero_switches_the_signal_off(name: str) -> None:
    assert OFF[name](getattr(DEFAULT, name)).fired
    off = OFF[name](0)
    assert (off.fired, off.value, off.detail) == (False, 0.0, "off")


@pytest.mark.parametrize(
    ("run", "expected"),
    [(0, False), (1, True), (2, False), (5, False), (6, True), (7, False), (11, True), (96, True), (100, False),
     (101, False), (106, False)],
)  # fmt: skip
def test_forced_on_the_first_drifting_reply_then_every_five(run: int, expected: bool) -> None:
    assert forced(run) is expected


# --- the path ------------------------------------------------------------------------------------------------

SETTINGS = StorySettings(banned_patterns=("as an ai",))


def normal(i: int) -> str:
    return f"She nods {i}, pours tea {i}, lights lamp {i}, opens book {i}, and waits {i}."


def words_of(i: int) -> str:
    return f"Question {i}: tell me about harbor {i} and ships {i} at dawn {i} please {i}."


def drifting(i: int) -> str:  # banned and echo
    return f"{words_of(i)} As an AI I must say this. {normal(i)}"


class Tree:
    def __init__(self) -> None:
        self.nodes: dict[UUID, NodeView] = {}
        self.loads = 0
        self.story = uuid4()
        self.root = self.add(None, "greeting", "…", 0)

    def add(self, parent: NodeView | None, kind: NodeKind, text: str, turn: int, hidden: bool = False) -> NodeView:
        depth = parent.depth + 1 if parent is not None else 0
        node = NodeView(
            uuid4(), self.story, parent.id if parent else None, kind, depth, turn, text, hidden, False, 0, "final", 0,
            0, datetime(2024, 1, 1, tzinfo=UTC),
        )  # fmt: skip
        self.nodes[node.id] = node
        return node

    def load(self, node_id: UUID) -> NodeView:
        self.loads += 1
        return self.nodes[node_id]

    def turns(self, parent: NodeView, texts: Sequence[str], first: int = 1, hidden: int = -1) -> list[NodeView]:
        out = [parent]
        for turn, text in enumerate(texts, start=first):
            user = self.add(out[-1], "user", words_of(turn), turn)
            out += [user, self.add(user, "reply", text, turn, hidden=turn == hidden)]
        return out[1:]


def story(count: int, drift: Callable[[int], bool] = lambda i: False, hidden: int = -1) -> tuple[Tree, list[NodeView]]:
    tree = Tree()
    return tree, tree.turns(tree.root, [drifting(i) if drift(i) else normal(i) for i in range(1, count + 1)], 1, hidden)


def judge(tree: Tree, node: NodeView, cache: DriftCache | None = None) -> DriftAt:
    return drift_at(node, tree.load, SETTINGS, "en", cache if cache is not None else DriftCache())


def test_two_signals_force_the_next_turn_and_a_normal_reply_after_does_not() -> None:
    tree, path = story(20, lambda i: i == 15)
    cache = DriftCache()
    at = judge(tree, path[29], cache)  # the reply of turn 15
    assert at.reply == path[29] and at.run == 1 and at.forced
    assert {"banned", "echo"} <= {s.name for s in at.signals if s.fired}
    assert judge(tree, path[30], cache).forced  # the user's words of turn 16: judged at reply 15
    after = judge(tree, path[31], cache)
    assert (after.reply, after.run, after.forced) == (path[31], 0, False) and after.fired < 2
    assert not judge(tree, path[27], cache).forced and judge(tree, tree.root, cache) == NO_DRIFT


def test_sustained_drift_forces_again_every_five_replies() -> None:
    tree, path = story(30, lambda i: i >= 15)
    cache = DriftCache()
    runs = [judge(tree, path[2 * i - 1], cache) for i in range(15, 27)]
    assert [at.run for at in runs] == list(range(1, 13))
    assert [at.forced for at in runs] == [(k % FORCE_EVERY) == 0 for k in range(12)]
    assert judge(tree, path[2 * 20 - 1]).run == 6  # cold: the run is counted up the path all the same


def test_a_branch_is_judged_on_its_own_path() -> None:
    tree, path = story(17, lambda i: i >= 15)
    sibling = tree.add(path[30], "reply", normal(16), 16)  # a regenerate of turn 16, written normally
    below = tree.turns(sibling, [drifting(17)], first=17)[-1]
    cache = DriftCache()
    assert [judge(tree, path[2 * i - 1], cache).run for i in (15, 16, 17)] == [1, 2, 3]
    assert (judge(tree, sibling, cache).run, judge(tree, sibling, cache).forced) == (0, False)
    assert (judge(tree, below, cache).run, judge(tree, below, cache).forced) == (1, True)


@pytest.mark.parametrize("hidden", [True, False])
def test_a_hidden_reply_is_not_judged(hidden: bool) -> None:
    tree, path = story(20, lambda i: i == 15, hidden=15 if hidden else -1)
    at, then = judge(tree, path[29]), judge(tree, path[31])
    assert (at.forced, then.forced) == (not hidden, False)
    assert at.reply == (path[27] if hidden else path[29])
    judged = {reply for at_ in (at, then) for s in at_.signals for reply in s.replies}
    assert (path[29].id in judged) is not hidden


@pytest.mark.parametrize("hidden", [-1, 3])
def test_early_lengths_warm_and_cold_agree(hidden: int) -> None:
    tree = Tree()
    texts = [f"{normal(i)} {'y' * i}" for i in range(1, 61)]
    path = tree.turns(tree.root, texts, hidden=hidden)
    replies = [n for n in path if n.kind == "reply" and not n.hidden]
    expected = tuple(reply_length(n.text) for n in replies[:10])
    assert len(set(expected)) == 10
    warm = DriftCache()
    for node in path:
        seen = tuple(reply_length(n.text) for n in replies if n.depth <= node.depth)[:10]
        assert early_lengths(node, tree.load, warm) == early_lengths(node, tree.load, DriftCache()) == seen
    head = [tree.root, *(n for n in path if n.depth <= 41)]
    assert early_lengths(path[-1], tree.load, DriftCache(), lambda _: head) == expected


def test_the_next_turn_after_a_warm_cache_loads_a_handful_of_nodes() -> None:
    tree, path = story(200)
    cache = DriftCache()
    judge(tree, path[2 * 150 - 1], cache)
    cold, tree.loads = tree.loads, 0
    judge(tree, path[2 * 151 - 1], cache)
    warm, tree.loads = tree.loads, 0
    judge(tree, path[2 * 152 - 2], cache)  # the context of turn 152: judged at reply 151, remembered
    assert cold > 250 and warm <= 2 * RECENT + 4 and tree.loads <= 1


# --- the re-anchoring block ------------------------------------------------------------------------------------

ANCHORS: dict[Language, tuple[str, str, str]] = {
    "zh": ("{{char}}是森林的守护者，说话温柔，从不说谎。", "塞拉菲娜", "【身份锚点 · 塞拉菲娜】"),
    "en": ("{{char}} guards the forest glade; gentle, never lies.", "Seraphina", "[WHO Seraphina IS]"),
}


def fill(char: str) -> Callable[[str], str]:
    return lambda text: text.replace("{{char}}", char)


def forced_drift() -> DriftAt:
    reply = Tree().add(None, "reply", "…", 9)
    signals = (
        Signal("banned", 1.0, 1.0, True, (reply.id,), "", "As an AI"),
        Signal("echo", 0.9, 0.6, True, (reply.id,), ""),
        Signal("creep", 1.0, 2.2, False, (reply.id,), "", "120"),
    )
    return DriftAt(reply, signals, 1)


@pytest.mark.parametrize("language", ["zh", "en"])
@pytest.mark.parametrize(
    ("turn", "every", "forced_", "periodic"),
    [(15, 15, False, True), (30, 15, False, True), (14, 15, False, False), (0, 15, False, False),
     (15, 0, False, False), (15, 0, True, False), (14, 15, True, False), (15, 15, True, True)],
)  # fmt: skip
def test_reanchor_block(language: Language, turn: int, every: int, forced_: bool, periodic: bool) -> None:
    anchor, char, heading = ANCHORS[language]
    drift = forced_drift() if forced_ else NO_DRIFT
    block = reanchor_block(anchor, char, "旅人", language, turn, every, drift, fill(char))
    if not (forced_ or periodic):
        assert block is None
        return
    assert block is not None and block.what == "reanchor" and "{{char}}" not in block.text
    assert block.text.startswith(f"{heading}\n{anchor.replace('{{char}}', char)}\n")
    assert (f"re-anchoring every {every} turns (turn {turn})" in block.why) is periodic
    texts = ANCHOR_TEXTS[language]
    if forced_:
        assert drift.reply is not None and f"forced by drift at reply {drift.reply.id} (turn 9)" in block.why
        assert block.node_ids == (drift.reply.id,)
        assert texts.signal_names["banned"] + texts.hint_sep + texts.signal_names["echo"] in block.text
        assert texts.signal_names["creep"] not in block.text  # not fired
        assert "As an AI" in block.text and "旅人" in block.text
    else:
        assert block.node_ids == () and texts.periodic.format(char=char) in block.text


def test_a_forced_block_in_chinese_names_the_signals_in_chinese_with_their_evidence() -> None:
    tree, path = story(16, lambda i: i == 15)
    drift = judge(tree, path[30])
    zh = reanchor_block("{{char}}是守护者。", "塞拉菲娜", "旅人", "zh", 16, 15, drift, fill("塞拉菲娜"))
    assert zh is not None and str(path[29].id) in zh.why and "the card forbids" not in zh.text
    assert all(w in zh.text for w in ("出现了角色卡禁止的写法", "复述对方的话", "不再使用「As an AI」这类写法"))
    assert reanchor_block("  ", "塞拉菲娜", "旅人", "zh", 15, 15, drift, fill("塞拉菲娜")) is None  # no anchor
    signals = (Signal("creep", 3.0, 2.2, True, (), "", "120"), Signal("language", 1.0, 0.6, True, (), "", "zh"))
    hints = reanchor_block("x", "C", "U", "zh", 3, 15, replace(drift, signals=signals), str)
    assert hints is not None and "回复越写越长；换了语言" in hints.text
    assert "约 120 字" in hints.text and "用中文回答" in hints.text


def test_a_hide_changes_the_early_lengths_of_a_warm_cache_as_of_a_cold_one() -> None:
    tree = Tree()
    path = tree.turns(tree.root, [f"{normal(i)} {'y' * i}" for i in range(1, 31)])
    warm = DriftCache()
    before = early_lengths(path[-1], tree.load, warm, epoch=0)
    first = path[1]  # the first reply, hidden: the story's render epoch moves on
    tree.nodes[first.id] = replace(first, hidden=True, version=first.version + 1)
    after = early_lengths(path[-1], tree.load, warm, epoch=1)
    assert after == early_lengths(path[-1], tree.load, DriftCache(), epoch=1) != before
    assert after[0] == reply_length(path[3].text)


def test_a_run_longer_than_it_is_followed_is_counted_the_same_warm_and_cold() -> None:
    tree, path = story(140, lambda i: i >= 10)
    warm = DriftCache()
    top = judge(tree, path[2 * 140 - 1], warm)  # followed back RUN_MOST replies: the top is over, the rest unknown
    assert top.run == RUN_MOST + 1 and not top.forced
    for turn in (40, 41, 110):
        reply = path[2 * turn - 1]
        assert judge(tree, reply, warm).run == judge(tree, reply).run == turn - 9


def test_a_banned_pattern_that_may_match_nothing_finds_its_words_anywhere_in_the_reply() -> None:
    reply = Exchange(uuid4(), 12, "", "The lamp is lit tonight. As an AI, I cannot leave the tower.")
    signal = banned(reply, ("(as an ai)?",))
    assert signal.fired and signal.evidence == "As an AI"
    assert not banned(replace(reply, reply="The lamp is lit tonight."), ("(as an ai)?",)).fired
