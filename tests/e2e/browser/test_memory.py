"""A story's memory in a browser: the context view's budget bar and blocks, a manual compaction (Memory tab,
"Compact now") whose episode, or digest, then shows in the context, a summary edited and seen in the next context, a refused
compaction shown as its problem, the scene edited (and its refused part warned of), and a handbook item's
sources opened."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.browser.conftest import Console, go, new_story
from tests.processes import Server

pytestmark = pytest.mark.slow
EDITED = "用户改写的分段：风暴夜里灯塔熄了，两人在仓库找到了航海日志。"


def tab(page: Page, name: str) -> None:
    page.get_by_role("tab", name=name).click()


def test_the_budget_bar_and_a_manual_compaction_seen_in_the_context(page: Page, server: Server) -> None:
    story = new_story(server, turns=16, keep_turns=2, fill_window=False)
    go(page, server, f"#/stories/{story['id']}/context")
    expect(page.get_by_test_id("budget-bar")).to_be_visible()
    expect(page.get_by_test_id("budget-bar").locator(".seg").first).to_be_visible()
    blocks = page.get_by_test_id("context-block")
    expect(blocks.and_(page.locator("[data-what=verbatim]"))).to_have_count(1)
    expect(blocks.and_(page.locator("[data-what=episode]"))).to_have_count(0)

    tab(page, "Memory")
    page.get_by_test_id("memory-compact").click()
    expect(page.get_by_test_id("memory-compact-done")).to_contain_text("episode of turns")
    expect(page.get_by_test_id("memory-episode")).to_have_count(1)

    tab(page, "Context")
    episode = blocks.and_(page.locator("[data-what=episode]"))
    expect(episode).to_have_count(1)
    episode.get_by_role("button").first.click()
    expect(episode.get_by_test_id("block-text")).to_contain_text("### 第0–14轮")
    expect(episode.get_by_test_id("block-text")).to_contain_text("青鸟号")


def test_a_digest_made_by_a_manual_compaction_is_a_block_of_the_context(page: Page, server: Server) -> None:
    story = new_story(server, turns=16, keep_turns=2, episodes_kept=0, fill_window=False)
    go(page, server, f"#/stories/{story['id']}/memory")
    page.get_by_test_id("memory-compact").click()
    expect(page.get_by_test_id("memory-compact-done")).to_contain_text("digest")
    tab(page, "Context")
    expect(page.get_by_test_id("budget-bar")).to_be_visible()
    digest = page.get_by_test_id("context-block").and_(page.locator("[data-what=digest]"))
    expect(digest).to_have_count(1)
    expect(page.get_by_test_id("budget-bar").locator(".seg.layer-digest")).to_have_count(1)
    digest.get_by_role("button").first.click()
    expect(digest.get_by_test_id("block-text")).to_contain_text("## 前情提要")


def test_an_edited_summary_is_in_the_next_context(page: Page, server: Server) -> None:
    story = new_story(server, turns=16, keep_turns=2, fill_window=False)
    server.call("POST", f"/v1/stories/{story['id']}/compact", {})
    go(page, server, f"#/stories/{story['id']}/context")  # (the context as it is before the edit)
    episode = page.get_by_test_id("context-block").and_(page.locator("[data-what=episode]"))
    expect(episode).to_have_count(1)

    tab(page, "Memory")
    page.get_by_test_id("memory-episode-text-edit").click()
    page.get_by_test_id("memory-episode-text-input").fill(EDITED)
    page.get_by_test_id("memory-episode-text-save").click()
    expect(page.get_by_test_id("memory-episode-text")).to_contain_text(EDITED)
    expect(page.get_by_test_id("memory-episode")).to_contain_text("edited")

    tab(page, "Context")
    episode.get_by_role("button").first.click()
    expect(episode.get_by_test_id("block-text")).to_contain_text(EDITED)


def test_a_refused_compaction_shows_its_problems_title_and_detail(page: Page, server: Server, console: Console) -> None:
    console.allow(r"status of 422")
    story = new_story(server, turns=1)
    status, _, problem = server.send("POST", f"/v1/stories/{story['id']}/compact", {})
    assert status == 422, problem
    go(page, server, f"#/stories/{story['id']}/memory")
    page.get_by_test_id("memory-compact").click()
    shown = page.get_by_test_id("memory-summaries").get_by_test_id("problem")
    expect(shown).to_contain_text(problem["title"])
    expect(shown).to_contain_text(problem["detail"])


def test_the_scene_is_edited_and_a_refused_part_is_warned_of(page: Page, server: Server) -> None:
    story = new_story(server, turns=2)
    go(page, server, f"#/stories/{story['id']}/scene")
    expect(page.get_by_test_id("scene-location-shown")).to_have_text("—")
    page.get_by_test_id("scene-edit").locator("summary").click()
    page.get_by_test_id("scene-time").fill("黄昏")
    page.get_by_test_id("scene-location").fill("灯塔")
    page.get_by_test_id("scene-character-name").fill("顾川")
    page.get_by_test_id("scene-character-status").fill("浑身湿透")
    page.get_by_test_id("scene-raw").fill('{"weather": "雾"}')
    page.get_by_test_id("scene-apply").click()
    expect(page.get_by_test_id("scene-location-shown")).to_have_text("灯塔")
    expect(page.get_by_test_id("scene-time-shown")).to_have_text("黄昏")
    expect(page.get_by_test_id("scene-characters")).to_contain_text("浑身湿透")
    expect(page.get_by_test_id("scene-warnings")).to_contain_text("weather")
    scene = server.call("GET", f"/v1/stories/{story['id']}/scene")
    assert (scene["state"]["location"], scene["state"]["time"]) == ("灯塔", "黄昏")


def test_the_drift_signals_are_shown_beside_the_scene(page: Page, server: Server) -> None:
    story = new_story(server, turns=10, banned_patterns=["as an ai"], reanchor_turns=15)
    english = "As an AI language model, I think the ferry will come soon and the weather is fine today."
    for words in ("再说一遍？", "你怎么了？"):
        server.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": "user", "text": words})
        server.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": "reply", "text": english})
    go(page, server, f"#/stories/{story['id']}/scene")
    expect(page.get_by_test_id("drift-banned")).to_contain_text("fired")
    expect(page.get_by_test_id("drift-language")).to_contain_text("fired")
    expect(page.get_by_test_id("drift-echo")).to_contain_text("quiet")
    expect(page.get_by_test_id("drift-forced")).to_have_text("The next turn carries a forced re-anchoring")
    expect(page.get_by_test_id("drift-periodic")).to_contain_text("next at turn 15")
    page.get_by_test_id("drift-anchor").locator("summary").click()
    expect(page.get_by_test_id("drift-anchor")).to_contain_text("守灯塔的人。")


def test_a_handbook_items_sources_are_opened(page: Page, server: Server) -> None:
    story = new_story(server, turns=2)
    tag = f"[局:{story['id'].replace('-', '')[:8]}]"
    go(page, server, f"#/stories/{story['id']}/memory")
    expect(page.get_by_test_id("memory-version")).to_have_text("version 0")
    page.get_by_test_id("memory-sync").click()
    expect(page.get_by_test_id("memory-synced")).to_contain_text("Recapped 1")
    expect(page.get_by_test_id("memory-recap")).to_have_count(1)

    page.get_by_test_id("memory-handbook-edit").click()
    text = page.get_by_test_id("memory-handbook-input")
    text.fill(text.input_value() + f"\n# 世界既定事实（跨局）\n- 渡船三天一班 {tag}\n")
    page.get_by_test_id("memory-handbook-save").click()
    item = page.get_by_test_id("memory-item").filter(has_text="渡船三天一班")
    expect(item).to_have_count(1)
    item.get_by_test_id("memory-item-sources").click()
    audit = item.get_by_test_id("memory-audit")
    expect(audit.get_by_test_id("memory-audit-story")).to_have_count(1)
    expect(audit).to_contain_text(story["id"][:8])
    expect(audit).to_contain_text("read turns")
    audit.get_by_test_id("memory-audit-story").click()
    expect(page).to_have_url(f"{server.base}/#/stories/{story['id']}/play")


def test_the_identity_anchor_is_written_on_the_card_page_and_a_bad_pattern_is_refused(
    page: Page, server: Server, console: Console
) -> None:
    console.allow(r"status of 422")  # (the refused pattern's request, as the browser logs it)
    story = new_story(server, turns=1)
    card = story["card_id"]
    go(page, server, f"#/cards/{card}")
    page.get_by_test_id("anchor-edit").locator("summary").click()
    expect(page.get_by_test_id("anchor-derived")).to_have_text("守灯塔的人。")  # (derived from the description)
    page.get_by_test_id("anchor-banned").fill("(unclosed")
    page.get_by_test_id("anchor-save").click()
    expect(page.get_by_test_id("problem")).to_contain_text("pattern 0 is not a regular expression")
    page.get_by_test_id("anchor-text").fill("{{char}}：守塔人，话少，从不离开灯塔。")
    page.get_by_test_id("anchor-every").fill("10")
    page.get_by_test_id("anchor-banned").fill("作为AI\n(as an ai)?")
    page.get_by_test_id("anchor-save").click()
    page.get_by_test_id("anchor-edit").locator("summary").click()
    expect(page.get_by_test_id("anchor-text")).to_have_value("{{char}}：守塔人，话少，从不离开灯塔。")
    settings = server.call("GET", f"/v1/cards/{card}")["settings"]
    assert settings["identity_anchor"] == "{{char}}：守塔人，话少，从不离开灯塔。" and settings["reanchor_turns"] == 10
    assert settings["banned_patterns"] == ["作为AI", "(as an ai)?"]
    drift = server.call("GET", f"/v1/stories/{story['id']}/drift")
    assert drift["anchor"] == settings["identity_anchor"] and drift["reanchor_turns"] == 10  # (a story of the card)
