"""Lorebook activation and search: which entries a turn's messages fire and why, table-tested rule by rule."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.card.lore import LoreActivation, LoreBookView, LoreEntry, LoreScan
from domain.card.rules.lore import LoreBudget, activate, search_lore, search_terms

CHAR, USER = "Seraphina", "Alice"


def entry(uid: int = 0, *keys: str, **fields: Any) -> LoreEntry:
    fields.setdefault("content", f"content {uid}")
    return LoreEntry(uid=uid, keys=keys, **fields)


def book(*entries: LoreEntry, book_id: str = "card", **scan: Any) -> LoreBookView:
    return LoreBookView(book_id, LoreScan(**scan), entries)


def run(books: LoreBookView | list[LoreBookView], *messages: str, **kwargs: Any) -> LoreActivation:
    return activate(books if isinstance(books, list) else [books], messages, char=CHAR, user=USER, **kwargs)


def tens(tokens: int, constants: bool = True) -> LoreBudget:
    """A budget of `tokens` where every entry costs 10."""
    return LoreBudget(tokens, lambda _: 10, constants)


def fired(books: LoreBookView | list[LoreBookView], *messages: str) -> list[int]:
    return [hit.entry.uid for hit in run(books, *messages).hits]


@pytest.mark.parametrize(
    ("logic", "text", "fires", "secondary"),
    [
        ("and_any", "the knight draws his sword", True, "sword"),
        ("and_any", "the knight draws his shield", True, "shield"),
        ("and_any", "the knight waits", False, None),
        ("and_all", "the knight with sword and shield", True, "sword"),
        ("and_all", "the knight with a sword", False, None),
        ("not_any", "the knight waits", True, None),
        ("not_any", "the knight draws his sword", False, None),
        ("not_all", "the knight draws his sword", True, None),
        ("not_all", "the knight waits", True, None),
        ("not_all", "the knight with sword and shield", False, None),
    ],
)
def test_selective_logic(logic: str, text: str, fires: bool, secondary: str | None) -> None:
    knight = entry(1, "knight", secondary_keys=("sword", "shield"), logic=logic)
    hits = run(book(knight), text).hits
    assert [(h.key, h.secondary) for h in hits] == ([("knight", secondary)] if fires else [])


def test_secondary_keys_count_only_for_selective_entries() -> None:
    knight = entry(1, "knight", secondary_keys=("sword",), selective=False)
    assert fired(book(knight), "the knight waits") == [1]


@pytest.mark.parametrize(
    ("book_case", "entry_case", "text", "fires"),
    [
        (False, None, "we reach eldoria", True),
        (True, None, "we reach eldoria", False),
        (True, None, "we reach Eldoria", True),
        (True, False, "we reach eldoria", True),
        (False, True, "we reach eldoria", False),
        (False, True, "we reach Eldoria", True),
    ],
)
def test_case_sensitivity_book_and_entry(book_case: bool, entry_case: bool | None, text: str, fires: bool) -> None:
    lore = book(entry(1, "Eldoria", case_sensitive=entry_case), case_sensitive=book_case)
    assert fired(lore, text) == ([1] if fires else [])


@pytest.mark.parametrize(
    ("key", "text", "whole_words", "fires"),
    [
        ("wood", "into the woodland", True, False),
        ("wood", "into the woodland", False, True),
        ("wood", "the wood is dark", True, True),
        ("wood", "firewood", True, False),
        ("Eldoria", "Eldoria's forests", True, True),
        ("Eldoria", "Eldoria2", True, False),
        ("magical forest", "a magical forest appears", True, True),
        ("magical forest", "magical forests", True, False),
        ("magical forest", "an unmagical forest", True, False),
        ("magical forest", "magical forests", False, True),
        ("怪兽", "森林里的怪兽出现了", True, True),
        ("艾尔多利亚", "前往艾尔多利亚的路", True, True),
        ("シャドウ", "シャドウファングが来た", True, True),
        ("Seraphina", "我见到了Seraphina。", True, True),
        ("Seraphina", "我见到了Seraphina她笑了", True, True),
        ("Seraphina", "Seraphinas", True, False),
        ("Seraphina的剑", "他拔出Seraphina的剑来", True, True),
        ("Seraphina的剑", "他拔出XSeraphina的剑来", True, False),
    ],
)
def test_whole_words_english_and_chinese(key: str, text: str, whole_words: bool, fires: bool) -> None:
    assert fired(book(entry(1, key), whole_words=whole_words), text) == ([1] if fires else [])


FIVE_BACK = ["User: a lantern glows", "User: two", "User: three", "User: four", "User: five"]


@pytest.mark.parametrize(
    ("book_depth", "entry_depth", "fires"),
    [(4, None, False), (5, None, True), (4, 5, True), (5, 4, False), (5, 0, False), (0, None, False), (0, 9, True)],
)
def test_scan_depth_counts_the_newest_messages(book_depth: int, entry_depth: int | None, fires: bool) -> None:
    lore = book(entry(1, "lantern", scan_depth=entry_depth), scan_depth=book_depth)
    assert fired(lore, "User: the oldest", *FIVE_BACK) == ([1] if fires else [])


def test_constant_entries_always_activate_and_are_charged_to_the_budget_first() -> None:
    lore = book(
        entry(1, content="the sky is green", constant=True, order=50),
        entry(2, "forest", constant=True, order=10),
        entry(3, "forest"),
        entry(4, "glade", order=200),
    )
    found = run(lore, "User: the forest and the glade", budget=tens(30))
    assert [(h.entry.uid, h.key, h.why) for h in found.constants] == [(2, None, "constant"), (1, None, "constant")]
    assert [h.entry.uid for h in found.hits] == [4]  # (the higher order first: one hit's room is left)
    assert [(h.entry.uid, h.left_out) for h in found.left_out] == [(3, "budget")]
    assert found.tokens == 30
    assert [h.entry.uid for h in run(lore).constants] == [2, 1]
    uncharged = run(lore, "User: the forest and the glade", budget=tens(20, constants=False))
    assert [h.entry.uid for h in uncharged.hits] == [3, 4] and uncharged.tokens == 20
    assert [h.entry.uid for h in run(lore, "User: the forest", budget=tens(20)).hits] == []  # the constants took it


def test_constants_are_ordered_across_books() -> None:
    first = book(entry(1, constant=True, order=30, content="card rule"), book_id="card")
    second = book(entry(1, constant=True, order=20, content="world rule"), book_id="world")
    assert [(h.book_id, h.entry.order) for h in run([first, second]).constants] == [("world", 20), ("card", 30)]


def test_disabled_entries_never_activate() -> None:
    lore = book(entry(1, "forest", enabled=False), entry(2, constant=True, enabled=False))
    found = run(lore, "User: the forest")
    assert (found.constants, found.hits) == ((), ())


def test_entries_without_keys_never_activate_by_keyword() -> None:
    assert fired(book(entry(1), entry(2, "", "  ")), "User: anything at all") == []


@pytest.mark.parametrize(
    ("orders", "room", "kept", "not_kept"),
    [
        ((30, 10, 40, 20), 2, [1, 3], 2),
        ((30, 10, 40, 20), 3, [4, 1, 3], 1),
        ((30, 10, 40, 20), 10, [2, 4, 1, 3], 0),
        ((100, 100, 100), 2, [1, 2], 1),
        ((30, 10), 0, [], 2),
    ],
)
def test_a_short_budget_keeps_the_highest_orders_and_the_prompt_has_them_lowest_first(
    orders: tuple[int, ...], room: int, kept: list[int], not_kept: int
) -> None:
    lore = book(*(entry(i, "forest", order=order) for i, order in enumerate(orders, 1)))
    found = run(lore, "User: the forest", budget=tens(room * 10))
    assert [h.entry.uid for h in found.hits] == kept
    assert found.not_kept == not_kept and {h.left_out for h in found.left_out} <= {"budget"}


def test_the_first_hit_over_the_budget_ends_the_activation() -> None:
    """SillyTavern's overflow: a smaller hit after the one that did not fit is left out too."""
    lore = book(entry(1, "forest", order=30, content="x" * 25), entry(2, "forest", order=20, content="y"))
    found = run(lore, "User: the forest", budget=LoreBudget(20, lambda e: len(e.content)))
    assert found.hits == () and [h.entry.uid for h in found.left_out] == [1, 2]


def test_hits_go_in_by_order_then_book_then_entry() -> None:
    card = book(entry(1, "forest", order=50), entry(2, "forest", order=10), book_id="card", max_hits=2)
    world = book(
        entry(1, "forest", order=10, content="w1"),
        entry(2, "forest", order=50, content="w2"),
        book_id="world",
        max_hits=5,
    )
    found = run([card, world], "User: the forest")
    assert [(h.book_id, h.entry.uid) for h in found.hits] == [("card", 2), ("world", 1), ("card", 1), ("world", 2)]


@pytest.mark.parametrize(
    ("key", "text", "fires"),
    [
        ("{{char}}", "User: Seraphina smiles", True),
        ("{{CHAR}}", "User: Seraphina smiles", True),
        ("<BOT>", "User: seraphina smiles", True),
        ("{{user}}", "Seraphina: hello Alice", True),
        ("<user>", "Seraphina: hello Alice", True),
        ("{{user}}", "Seraphina: hello {{user}}", False),
        ("{{char}}'s glade", "User: to Seraphina's glade", True),
        ("/{{char}} smiles/", "User: Seraphina smiles", True),
    ],
)
def test_names_are_filled_into_keys(key: str, text: str, fires: bool) -> None:
    hits = run(book(entry(1, key)), text).hits
    assert [h.key for h in hits] == ([key] if fires else [])


def test_a_name_in_a_regex_key_matches_literally() -> None:
    lore = book(entry(1, r"/{{char}}\s+smiles/"))
    found = [activate([lore], [text], char="Dr. Who", user=USER).hits for text in ("Dr. Who smiles", "DrX Who smiles")]
    assert [len(hits) for hits in found] == [1, 0]


@pytest.mark.parametrize(
    ("keys", "use_regex", "text", "key"),
    [
        ((r"/shadow\w+/i",), False, "User: The SHADOWFANGS came", r"/shadow\w+/i"),
        ((r"/shadow\w+/",), False, "User: The SHADOWFANGS came", None),
        ((r"/shadow\w+/",), False, "User: the shadowfangs came", r"/shadow\w+/"),
        ((r"/shadow\w+/gi",), False, "User: The SHADOWFANGS came", r"/shadow\w+/gi"),
        ((r"/^User/y",), False, "User: hello", r"/^User/y"),
        ((r"/hello/y",), False, "User: hello", None),
        ((r"shadow\w+",), True, "User: The SHADOWFANGS came", r"shadow\w+"),
        ((r"shadow\w+",), False, "User: The SHADOWFANGS came", None),
        (("/([a-/", "forest"), False, "User: the forest", "forest"),
        (("(unclosed", "forest"), True, "User: the forest (unclosed", "forest"),
        (("/a/b/",), False, "User: see /a/b/ here", "/a/b/"),
        ((r"/gl[ae]de/",), False, "User: to the glade", r"/gl[ae]de/"),
    ],
)
def test_regex_keys(keys: tuple[str, ...], use_regex: bool, text: str, key: str | None) -> None:
    hits = run(book(entry(1, *keys, use_regex=use_regex)), text).hits
    assert [h.key for h in hits] == ([key] if key else [])


def test_a_use_regex_entry_follows_the_case_setting() -> None:
    lore = book(entry(1, r"shadow\w+", use_regex=True, case_sensitive=True))
    assert fired(lore, "User: The SHADOWFANGS came") == []


def test_a_catastrophic_pattern_runs_out_of_time_and_is_reported() -> None:
    lore = book(
        entry(7, "/(a+)+$/", content="never"),
        entry(8, "lantern", content="a lantern"),
        recursive=True,
        max_recursion=3,
    )
    found = run(lore, "User: " + "a" * 5000 + "b", "User: a lantern", regex_timeout=0.02)
    assert found.timed_out == (("card", 7, "/(a+)+$/"),)
    assert [h.entry.uid for h in found.hits] == [8]


def test_recursion_is_off_by_default() -> None:
    lore = book(entry(1, "lantern", content="the lantern came from the mill"), entry(2, "mill"))
    assert fired(lore, "User: a lantern") == [1]


@pytest.mark.parametrize(("max_recursion", "fires"), [(0, [1]), (1, [1, 2]), (3, [1, 2, 3])])
def test_recursion_scans_the_content_of_hits(max_recursion: int, fires: list[int]) -> None:
    lore = book(
        entry(1, "lantern", content="the lantern came from the mill"),
        entry(2, "mill", content="the miller is {{char}}'s friend"),
        entry(3, "Seraphina's friend", content="nothing more"),
        recursive=True,
        max_recursion=max_recursion,
    )
    hits = run(lore, "User: a lantern").hits
    assert [(h.entry.uid, h.recursion) for h in hits] == [(uid, level) for level, uid in enumerate(fires)]


def test_recursion_applies_to_the_entries_of_recursive_books_only() -> None:
    card = book(entry(1, "lantern", content="the lantern came from the mill"), book_id="card")
    world = book(entry(2, "mill"), book_id="world", recursive=True)
    plain = book(entry(3, "mill"), book_id="plain")
    assert [h.book_id for h in run([card, world, plain], "User: a lantern").hits] == ["card", "world"]


def test_direct_hits_are_kept_before_recursion_hits() -> None:
    lore = book(
        entry(1, "lantern", content="the mill", order=100),
        entry(2, "mill", order=1),
        entry(3, "lantern", order=50),
        recursive=True,
    )
    found = run(lore, "User: a lantern", budget=tens(20))
    assert ([h.entry.uid for h in found.hits], found.not_kept) == ([3, 1], 1)
    assert [(h.entry.uid, h.recursion, h.left_out) for h in found.left_out] == [(2, 1, "budget")]


def test_duplicate_content_activates_once_and_the_first_book_wins() -> None:
    card = book(entry(1, "forest", content="Eldoria is a forest."), entry(2, content="Rule.", constant=True))
    copy = book(
        entry(5, "forest", content="  Eldoria is a forest.\n"),
        entry(6, content="Rule.", constant=True),
        entry(7, "rule", content="Rule."),
        book_id="world",
    )
    found = run([card, copy], "User: the forest rule")
    assert [(h.book_id, h.entry.uid) for h in found.constants] == [("card", 2)]
    assert [(h.book_id, h.entry.uid) for h in found.hits] == [("card", 1)]


def test_empty_content_is_never_a_duplicate() -> None:
    assert fired(book(entry(1, "forest", content=""), entry(2, "forest", content=" ")), "User: forest") == [1, 2]


# Search


def test_search_terms_split_on_non_letters_and_break_cjk_runs_into_bigrams() -> None:
    assert search_terms("Who are the Shadow-fangs? a") == ["who", "are", "the", "shadow", "fangs"]
    assert search_terms("森林里的怪兽") == ["森林里的怪兽", "森林", "林里", "里的", "的怪", "怪兽"]
    assert search_terms("去Eldoria的路") == ["去eldoria的路", "eldoria", "的路"]


def test_search_scores_keys_title_and_content() -> None:
    dragon = entry(1, "dragon", title="Dragons", content="dragon dragon dragon dragon")
    wyrm = entry(2, "wyrm", content="a dragon")
    fly = entry(3, "dragonfly", content="")
    off = entry(4, "dragon", enabled=False)
    lizard = entry(5, "lizard", content="")
    found = search_lore([book(dragon, wyrm, fly, off, lizard)], "dragon", char=CHAR, user=USER, limit=10)
    assert [(score, e.uid) for score, _, e in found] == [(11, 1), (8, 3), (1, 2)]


def test_a_key_inside_the_term_counts() -> None:
    found = search_lore([book(entry(1, "dragon", content=""))], "dragonfly", char=CHAR, user=USER)
    assert [(score, e.uid) for score, _, e in found] == [(5, 1)]


def test_search_in_english() -> None:
    lore = book(
        entry(1, "eldoria", "forest", content="Eldoria is here, all of the woods."),
        entry(2, "shadowfang", "beast", content="The Shadowfangs are beasts of darkness."),
        entry(3, "glade", "refuge", content="This is my forest glade."),
    )
    found = search_lore([lore], "What are the Shadowfang beasts?", char=CHAR, user=USER)
    assert (found[0][0], found[0][2].uid) == (17, 2)


def test_a_chinese_query_without_spaces_finds_its_key() -> None:
    lore = book(
        entry(1, "怪兽", content="森林深处的怪兽在夜里出没。"),
        entry(2, "艾尔多利亚", content="一片古老的土地。"),
        book_id="world",
    )
    found = search_lore([lore], "森林里的怪兽是什么", char=CHAR, user=USER)
    assert [(book_id, e.uid) for _, book_id, e in found] == [("world", 1)]


def test_search_ties_go_to_the_lower_order_and_limit_holds() -> None:
    lore = book(*(entry(uid, "forest", content="", order=order) for uid, order in ((1, 30), (2, 10), (3, 20))))
    found = search_lore([lore], "forest", char=CHAR, user=USER, limit=2)
    assert [e.uid for _, _, e in found] == [2, 3]
    assert search_lore([lore], "forest", char=CHAR, user=USER, limit=0) == []
    assert search_lore([lore], "a ! ?", char=CHAR, user=USER) == []


def test_search_fills_names_and_skips_duplicate_content() -> None:
    first = book(entry(1, "{{char}}", content="who {{char}} is"))
    second = book(entry(1, "{{char}}", content="who {{char}} is "), book_id="world")
    found = search_lore([first, second], "seraphina", char=CHAR, user=USER)
    assert [(score, book_id) for score, book_id, _ in found] == [(5 + 3 + 1, "card")]


# Properties

KEY_CHARS = "ab森林 /\\()[]{}+*?|^$.iwWs"


@settings(max_examples=150, deadline=None)
@given(
    keys=st.lists(st.text(alphabet=KEY_CHARS, max_size=12), max_size=4),
    secondary=st.lists(st.text(alphabet=KEY_CHARS, max_size=8), max_size=2),
    use_regex=st.booleans(),
    logic=st.sampled_from(["and_any", "not_all", "not_any", "and_all"]),
    messages=st.lists(st.text(max_size=60), max_size=5),
    recursive=st.booleans(),
)
def test_activation_never_raises(
    keys: list[str], secondary: list[str], use_regex: bool, logic: str, messages: list[str], recursive: bool
) -> None:
    lore = book(
        entry(1, *keys, secondary_keys=tuple(secondary), use_regex=use_regex, logic=logic, content=" ".join(keys)),
        entry(2, *secondary, content=" ".join(messages)),
        recursive=recursive,
    )
    found = activate([lore], messages, char="{{char}}", user="/", regex_timeout=0.01)
    assert len(found.hits) + found.not_kept <= 2
    assert search_lore([lore], " ".join(messages + keys), char=CHAR, user=USER) is not None


def test_the_regex_keys_of_an_activation_share_one_time_budget_and_slow_keys_are_reported_each_time() -> None:
    ticks = iter(range(10**6))

    def clock() -> float:  # every look at the clock: 10 ms later
        return next(ticks) * 0.01

    keys = [LoreEntry(uid=i, keys=(f"/dragon{i}s?/",), content=f"d{i}") for i in range(300)]
    book = LoreBookView("b", LoreScan(), keys)
    found = activate([book], ["x: the dragon299 flies"], char="c", user="u", clock=clock, regex_budget=0.5)
    assert found.timed_out and len(found.timed_out) < 300  # some ran within the budget, the rest were left out
    unlimited = activate([book], ["x: the dragon299 flies"], char="c", user="u")
    assert 299 in [hit.entry.uid for hit in unlimited.hits] and not unlimited.timed_out  # no cap on regex keys
    slow = LoreBookView("s", LoreScan(), [LoreEntry(uid=1, keys=("/(a+)+$/",), content="x")])
    for _ in range(2):  # once out of time, not run again, and still reported
        again = activate([slow], ["x: " + "a" * 5000 + "b"], char="c", user="u", regex_timeout=0.01)
        assert again.timed_out == (("s", 1, "/(a+)+$/"),)


def test_over_the_budget_the_entry_named_in_the_newest_message_is_kept() -> None:
    """Names in the greeting and older turns do not crowd out the one the user just named: over the budget,
    hits in newer messages are kept first, then the higher order (all within the scan depth)."""
    names = ("Rook", "Kiriha", "Ren", "Felix Vance")
    lore = book(*(entry(i, name, order=i * 10) for i, name in enumerate(names, 1)), scan_depth=4)
    greeting = "Seraphina: Rook, Kiriha and Ren wait by the door."
    found = run(lore, greeting, "Alice: Tell us about Felix Vance.", budget=tens(30))
    assert [h.entry.uid for h in found.hits] == [2, 3, 4]  # Felix kept, Rook (the lowest order) out
    assert [h.entry.uid for h in found.left_out] == [1]
    named_before = run(lore, "Alice: Felix Vance?", greeting, budget=tens(30))
    assert [h.entry.uid for h in named_before.hits] == [1, 2, 3]  # (Felix named further back this time)
