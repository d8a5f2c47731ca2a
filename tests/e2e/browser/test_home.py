"""The page's front door in a browser: signing in by the form (a refused key says so), a card imported by the
file input and a story started from it, an API error shown as its problem's title and detail, and the language
switch."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.browser.conftest import KEY_ITEM, Console, go, new_story
from tests.processes import Server
from tests.shared_data import cards_dir

pytestmark = pytest.mark.slow
SERAPHINA = "default_Seraphina.png"  # SillyTavern's default card, in shared/data (not in the repository)


def test_signing_in_by_the_form_and_a_refused_key_says_so(signed_out: Page, server: Server, console: Console) -> None:
    console.allow(r"status of 401")  # (the refused key's request, as the browser logs it)
    go(signed_out, server)
    key = signed_out.get_by_label("API key")
    key.fill("not-a-key")
    signed_out.get_by_role("button", name="Sign in").click()
    expect(signed_out.get_by_test_id("problem")).to_have_text("This key is not accepted.")
    assert signed_out.evaluate(f"sessionStorage.getItem({json.dumps(KEY_ITEM)})") is None

    key.fill(server.key)
    signed_out.get_by_role("button", name="Sign in").click()
    expect(signed_out.get_by_role("heading", name="Stories")).to_be_visible()
    expect(signed_out.get_by_role("button", name="Sign out")).to_be_visible()
    assert signed_out.evaluate(f"sessionStorage.getItem({json.dumps(KEY_ITEM)})") == server.key
    assert server.key not in signed_out.url


def a_card_file(folder: Path) -> Path:
    """A V2 card as a JSON file, written for the test."""
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "顾川",
            "description": "渡口的船夫，话不多。",
            "personality": "沉默",
            "scenario": "雾天的渡口。",
            "first_mes": "雾太大了，今天不开船。",
            "mes_example": "",
            "alternate_greetings": ["船靠岸了。"],
            "tags": [],
        },
    }
    path = folder / "gu-chuan.json"
    path.write_text(json.dumps(card, ensure_ascii=False), encoding="utf-8")
    return path


def test_a_card_imported_by_the_file_input_starts_a_story(page: Page, server: Server, tmp_path: Path) -> None:
    go(page, server)
    page.get_by_test_id("card-file").set_input_files(a_card_file(tmp_path))
    expect(page.get_by_role("status").filter(has_text="Imported 顾川")).to_be_visible()
    card = page.get_by_test_id("cards").locator("li").filter(has_text="顾川")
    card.get_by_test_id("start-story").click()
    expect(page).to_have_url(re.compile(r"#/stories/[0-9a-f-]{36}/play$"))
    expect(page.locator("[data-testid=message][data-kind=greeting]")).to_contain_text("雾太大了，今天不开船。")


def test_sillytaverns_default_png_card_is_imported(page: Page, server: Server, tmp_path: Path) -> None:
    copy = tmp_path / SERAPHINA  # (the shared file stays untouched)
    shutil.copyfile(cards_dir() / SERAPHINA, copy)
    go(page, server)
    page.get_by_test_id("card-file").set_input_files(copy)
    expect(page.get_by_role("status").filter(has_text="Imported Seraphina")).to_be_visible()
    page.get_by_test_id("cards").get_by_role("link", name="Seraphina").first.click()
    expect(page.get_by_role("heading", name="Seraphina", exact=True)).to_be_visible()
    expect(page.get_by_test_id("start-with").first).to_be_visible()


def test_an_api_error_is_shown_as_its_problems_title_and_detail(page: Page, server: Server, console: Console) -> None:
    console.allow(r"status of 404")
    missing = "00000000-0000-4000-8000-000000000000"
    status, _, problem = server.send("GET", f"/v1/stories/{missing}")
    assert status == 404 and problem["title"] and problem["detail"]
    go(page, server, f"#/stories/{missing}/play")
    shown = page.get_by_test_id("problem")
    expect(shown).to_contain_text(problem["title"])
    expect(shown).to_contain_text(problem["detail"])


def test_the_language_switch_turns_the_interface_to_chinese(page: Page, server: Server) -> None:
    story = new_story(server, turns=1)
    go(page, server, f"#/stories/{story['id']}/play")
    expect(page.get_by_role("tab", name="Play")).to_be_visible()
    page.get_by_label("Language / 语言").select_option("zh")
    expect(page.get_by_role("tab", name="对话")).to_be_visible()
    expect(page.get_by_role("tab", name="上下文")).to_be_visible()
    expect(page.get_by_role("button", name="退出")).to_be_visible()
    expect(page.get_by_test_id("composer-send")).to_have_text("发送")
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    page.reload()  # (the choice is kept)
    expect(page.get_by_role("tab", name="对话")).to_be_visible()
