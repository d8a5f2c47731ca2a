"""Playing in a browser, engine mode: three turns whose replies are seen growing as they stream, a swipe (a
regenerated reply, then the arrows between the two), a branch from an earlier node (checked out from the tree,
then a new turn: the path is the new branch), the jobs view's cost of them; and each view at 375 px wide
without a horizontal scroll."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.e2e.browser.conftest import ASKING, PiecewiseWriter, go, new_story
from tests.processes import Server

pytestmark = pytest.mark.slow
SECOND = PiecewiseWriter.SECOND

# Every text the streamed reply showed, in order: read off the page by a MutationObserver (no polling race).
WATCH_LIVE = """() => {
  window.seenLive = [];
  const look = () => {
    const live = document.querySelector("[data-testid=live-text]");
    const text = live ? live.textContent : null;
    if (text && window.seenLive[window.seenLive.length - 1] !== text) window.seenLive.push(text);
  };
  new MutationObserver(look).observe(document.body, { subtree: true, childList: true, characterData: true });
}"""


# Elements whose right edge is past the window's, but for those a scrolling or clipping box holds (the tabs scroll).
PAST_THE_EDGE = """() => {
  const width = document.documentElement.clientWidth;
  const held = (e) => {
    for (let up = e.parentElement; up && up !== document.body; up = up.parentElement)
      if (getComputedStyle(up).overflowX !== "visible") return true;
    return false;
  };
  return [...document.querySelectorAll("body *")]
    .filter((e) => e.getBoundingClientRect().right > width + 0.5 && !held(e))
    .map((e) => e.tagName.toLowerCase() + (e.className ? "." + String(e.className).split(" ").join(".") : ""))
    .slice(0, 10);
}"""


def messages(page: Page) -> Locator:
    return page.get_by_test_id("message")


def play_turn(page: Page, words: str) -> list[str]:
    """Send `words` in engine mode and wait for the reply to be sealed; the texts the live reply showed."""
    page.evaluate("window.seenLive = []")
    page.get_by_test_id("composer-text").fill(words)
    page.get_by_test_id("composer-send").click()
    expect(page.get_by_test_id("live-reply")).to_be_visible()
    expect(page.get_by_test_id("live-reply")).to_have_count(0)
    seen: list[str] = page.evaluate("window.seenLive")
    return seen


def last_reply(page: Page) -> Locator:
    return page.locator("[data-testid=message][data-kind=reply]").last


def path_texts(server: Server, story_id: str) -> list[str]:
    nodes: list[dict[str, Any]] = server.call("GET", f"/v1/stories/{story_id}/path")["nodes"]
    return [n["text"] for n in nodes]


def test_three_streamed_turns_a_swipe_and_a_branch(page: Page, server: Server) -> None:
    story = new_story(server)
    go(page, server, f"#/stories/{story['id']}/play")
    expect(page.get_by_test_id("composer-text")).to_be_visible()
    expect(page.get_by_test_id("mode")).to_have_value("engine")
    page.evaluate(WATCH_LIVE)

    words = ["灯塔还亮着吗？", "我们去仓库看看。", "北面的礁石下有什么？"]
    for n, said in enumerate(words, start=1):
        seen = play_turn(page, said)
        # the reply grew on the page: its first sentence alone, before the second was appended and it was sealed
        first = [text for text in seen if "我听见你说" in text and SECOND not in text]
        assert first, f"turn {n}: the reply was never shown partly written: {seen}"
        assert any(SECOND in text for text in seen[seen.index(first[-1]) :]), seen
        expect(messages(page)).to_have_count(1 + 2 * n)  # (the greeting, then each turn's two)
        expect(last_reply(page).get_by_test_id("message-text")).to_contain_text(f"「{said}」")
        expect(last_reply(page).get_by_test_id("message-text")).to_contain_text(SECOND)
    played = path_texts(server, story["id"])
    assert played[1::2][1:] == words[1:] and len(played) == 7

    # swipe: a regenerated reply beside the last, then the arrows between the two
    before = last_reply(page).get_by_test_id("message-text").inner_text()
    last_reply(page).get_by_test_id("regenerate").click()
    expect(page.get_by_test_id("live-reply")).to_be_visible()
    expect(page.get_by_test_id("live-reply")).to_have_count(0)
    expect(last_reply(page).get_by_test_id("swipe-position")).to_have_text("2/2")
    after = last_reply(page).get_by_test_id("message-text").inner_text()
    assert after != before and f"「{words[-1]}」" in after
    last_reply(page).get_by_role("button", name="Previous version").click()
    expect(last_reply(page).get_by_test_id("swipe-position")).to_have_text("1/2")
    expect(last_reply(page).get_by_test_id("message-text")).to_have_text(before)
    last_reply(page).get_by_role("button", name="Next version").click()
    expect(last_reply(page).get_by_test_id("swipe-position")).to_have_text("2/2")
    expect(last_reply(page).get_by_test_id("message-text")).to_have_text(after)
    assert path_texts(server, story["id"])[-1] == after

    # branch: check out the first turn's reply in the tree, then play a turn from there
    page.get_by_role("tab", name="Tree").click()
    expect(page.get_by_test_id("tree")).to_be_visible()
    chain = page.get_by_role("button", name="Expand turns", exact=False)
    if chain.count():
        chain.first.click()
    page.get_by_role("button", name="Check out turn 1 (Reply)").click()
    expect(page.get_by_test_id("tree-leaf")).to_contain_text("turn 1")
    page.get_by_role("tab", name="Play").click()
    expect(messages(page)).to_have_count(3)
    play_turn(page, "换一条路：去码头。")
    expect(messages(page)).to_have_count(5)
    branch = path_texts(server, story["id"])
    assert branch[:3] == played[:3] and branch[3] == "换一条路：去码头。" and "去码头" in branch[4]
    user = page.locator("[data-testid=message][data-kind=user]").nth(1)
    expect(user.get_by_test_id("swipe-position")).to_have_text("2/2")  # (beside the old line's second turn)
    page.get_by_role("tab", name="Tree").click()
    expect(page.get_by_text("2 forks", exact=False)).to_be_visible()  # (the swipe, and the branch)
    expect(page.get_by_test_id("tree-leaf")).to_contain_text("去码头")

    # the jobs view: the turns' background work, and the model calls they cost
    page.get_by_role("tab", name="Jobs").click()
    expect(page.get_by_test_id("jobs-counts")).to_be_visible()
    expect(page.get_by_test_id("jobs-costs")).to_contain_text("fake-main")


NARROW = ("home", "play", "tree", "context", "scene", "memory", "jobs")


@pytest.mark.parametrize("view", NARROW)
def test_a_view_at_375_px_has_no_horizontal_scroll(page: Page, server: Server, view: str) -> None:
    story = new_story(server, turns=4)
    page.set_viewport_size({"width": 375, "height": 740})
    go(page, server, "#/" if view == "home" else f"#/stories/{story['id']}/{view}")
    ready = {"home": "stories", "play": "composer-send", "memory": "card-memory"}.get(view, view)
    expect(page.get_by_test_id(ready)).to_be_visible()
    if view == "play":
        expect(messages(page)).to_have_count(9)
    page.wait_for_load_state("networkidle")
    widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1] == 375, f"the page is {widths[0]} px wide in a 375 px window"
    wide = page.evaluate(PAST_THE_EDGE)
    assert not wide, f"elements reach past the right edge: {wide}"


def test_a_decision_card_is_answered_and_the_turn_goes_on(page: Page, server: Server) -> None:
    story = new_story(server, turns=1)
    go(page, server, f"#/stories/{story['id']}/play")
    page.get_by_test_id("composer-text").fill(f"{ASKING}我们往哪走？")
    page.get_by_test_id("composer-send").click()
    card = page.get_by_test_id("ask")
    expect(card).to_contain_text("走哪条路？")
    page.reload()  # (the card is still there when the page comes back: the reply waits for its answer)
    expect(card).to_contain_text("走哪条路？")
    card.get_by_role("button", name="山路").click()
    expect(card).to_have_count(0)
    expect(last_reply(page).get_by_test_id("message-text")).to_contain_text("山路")
    assert "山路" in path_texts(server, story["id"])[-1]


def test_a_front_ends_chat_is_read_only_in_the_play_view(page: Page, server: Server) -> None:
    body = {
        "model": "fake-main",
        "messages": [
            {"role": "system", "content": "You are Mira, a ferry pilot."},
            {"role": "assistant", "content": "The ferry horn sounds."},
            {"role": "user", "content": "Is there room for one more?"},
        ],
    }
    server.call("POST", "/v1/chat/completions", body)
    relayed = next(s for s in server.call("GET", "/v1/stories?limit=500")["items"] if s["relayed"])
    go(page, server, f"#/stories/{relayed['id']}/play")
    expect(page.get_by_test_id("relayed")).to_be_visible()
    expect(messages(page)).to_have_count(3)
    expect(page.get_by_test_id("composer-text")).to_have_count(0)
    expect(page.get_by_test_id("edit")).to_have_count(0)
