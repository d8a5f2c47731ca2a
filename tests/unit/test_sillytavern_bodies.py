"""tests/sillytavern/ reproduces the bodies a real SillyTavern 1.12.6 sent (tests/fixtures/sillytavern/):
the same messages (roles, order, texts — the cut included), the same fields in the same order, the same bytes."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.shared_data import cards_dir
from tests.sillytavern.body import build_body, connection_test_body, greeting, plan_body
from tests.sillytavern.card import Card
from tests.sillytavern.macros import substitute
from tests.sillytavern.settings import CONTINUE_NUDGE_PROMPT, Settings
from tests.sillytavern.tokens import counter_for_model, message_tokens

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sillytavern"
SCENARIOS: list[dict[str, Any]] = json.loads((FIXTURES / "scenarios.json").read_text("utf-8"))["scenarios"]
FIELDS = ["messages", "model", "temperature", "max_tokens", "stream", "presence_penalty", "frequency_penalty"]
FIELDS += ["top_p", "logit_bias"]


@cache
def seraphina() -> Card:
    return Card.from_json(json.loads((cards_dir() / "default_Seraphina.card.json").read_text("utf-8")))


def recorded(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((FIXTURES / name).read_text("utf-8"))
    return body


def history(recipe: list[dict[str, Any]]) -> list[dict[str, str]]:
    chat1: list[dict[str, str]] = json.loads((FIXTURES / "chat1_history.json").read_text("utf-8"))
    out: list[dict[str, str]] = []
    for item in recipe:
        if "chat1" in item:
            start, end = item["chat1"]
            out += chat1[start:end]
        else:
            out.append({"role": item["role"], "content": item["content"]})
    return out


def build(scenario: dict[str, Any]) -> dict[str, Any]:
    body = recorded(scenario["file"])
    if scenario["sillytavern_generation"] == "connection_test":
        return connection_test_body()
    world_info = body["messages"][1]["content"] if "world_info_before" in scenario else ""
    return build_body(
        seraphina(),
        history(scenario["history"]),
        generation=scenario["sillytavern_generation"],
        settings=Settings(stream=body["stream"]),
        world_info_before=world_info,
        persona_description=scenario.get("persona_description", ""),
    )


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["file"].removesuffix(".json") for s in SCENARIOS])
def test_the_builder_reproduces_the_recorded_body(scenario: dict[str, Any]) -> None:
    body = recorded(scenario["file"])
    built = build(scenario)
    assert list(built) == FIELDS == list(body)
    assert [m["role"] for m in built["messages"]] == [m["role"] for m in body["messages"]]
    assert built == body
    # SillyTavern's server sends JSON.stringify(body): the same bytes as a compact dump
    assert json.dumps(built, ensure_ascii=False, separators=(",", ":")) == json.dumps(
        body, ensure_ascii=False, separators=(",", ":")
    )


def test_the_system_messages_before_the_chat() -> None:
    body = recorded("a_normal_turn.json")
    card = seraphina()
    main, description, marker = body["messages"][:3]
    assert main == {
        "role": "system",
        "content": "Write Seraphina's next reply in a fictional chat between Seraphina and User.",
    }
    assert description["content"] == card.description.strip().replace("\r", "").replace("{{user}}", "User").replace(
        "{{char}}", "Seraphina"
    )
    assert marker == {"role": "system", "content": "[Start a new Chat]"}
    assert all("name" not in m for m in body["messages"])  # names behaviour "default": no name fields


def test_world_info_sits_between_the_main_prompt_and_the_description() -> None:
    body = recorded("chat1_turn01.json")
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "system", "system", "system", "assistant", "user"]
    assert body["messages"][1]["content"].startswith('User: "What are your powers?"')
    assert body["messages"][3]["content"] == "[Start a new Chat]"
    assert body["messages"][4]["content"] == greeting(seraphina())["content"]


def test_the_cut_drops_the_greeting_and_keeps_the_marker() -> None:
    whole, cut = recorded("chat1_turn20.json"), recorded("chat1_turn21.json")
    greet = greeting(seraphina())["content"]
    assert whole["messages"][3]["content"] == greet
    assert len(whole["messages"]) == 3 + 40
    assert greet not in [m["content"] for m in cut["messages"]]
    assert cut["messages"][2]["content"] == "[Start a new Chat]"
    assert cut["messages"][3]["role"] == "user"  # the cut is per message, not per turn


def test_the_cut_fills_the_budget_and_stops_at_the_first_message_that_does_not_fit() -> None:
    scenario = next(s for s in SCENARIOS if s["file"] == "a_normal_turn.json")
    chat = history(scenario["history"])
    plan = plan_body(seraphina(), chat)
    count = counter_for_model("deepseek-chat")
    assert plan.kept == 43 and plan.considered == 122
    assert plan.budget_left >= 0
    first_left_out = chat[-plan.kept - 1]
    assert message_tokens(count, first_left_out["role"], first_left_out["content"]) > plan.budget_left
    used = sum(message_tokens(count, m["role"], m["content"]) for m in plan.body["messages"])
    assert used + plan.budget_left == 4095 - 300 - 3


def test_swipe_and_regenerate_send_the_same_body_again() -> None:
    assert recorded("e_swipe.json") == recorded("d_edit_earlier_user_then_new_words.json")
    assert recorded("c_regenerate.json") == recorded("b_delete_last_turn_new_words.json")
    scenario = next(s for s in SCENARIOS if s["file"] == "e_swipe.json")
    chat = history(scenario["history"])
    assert build_body(seraphina(), chat, generation="swipe") == build_body(seraphina(), chat[:-1])
    assert build_body(seraphina(), chat, generation="regenerate") == build_body(seraphina(), chat[:-1])


def test_continue_ends_with_a_system_nudge_quoting_the_reply() -> None:
    body = recorded("f_continue.json")
    reply, nudge = body["messages"][-2:]
    assert reply["role"] == "assistant" and nudge["role"] == "system"
    assert nudge["content"] == substitute(
        CONTINUE_NUDGE_PROMPT, user="User", char="Seraphina", extra={"lastChatMessage": reply["content"].strip()}
    )


def test_impersonate_ends_with_the_impersonation_prompt() -> None:
    body = recorded("h_impersonate.json")
    assert body["messages"][-1] == {
        "role": "system",
        "content": "[Write your next reply from the point of view of User, using the chat history so far as a "
        "guideline for the writing style of User. Write 1 reply only in internet RP style. Don't write as "
        "Seraphina or system. Don't describe actions of Seraphina.]",
    }
    assert body["messages"][-2]["role"] == "assistant"


def test_a_new_chat_of_the_same_card_opens_with_the_same_greeting() -> None:
    first, second = recorded("chat1_turn01.json"), recorded("g1_new_chat_turn01.json")
    assert first["messages"][:5] == second["messages"][:5]
    assert first["messages"][5] != second["messages"][5]


def test_options_the_recordings_do_not_cover() -> None:
    card = Card(
        name="Mira", description="{{char}} pilots a ferry.", mes_example="<START>\n{{user}}: Hi\n{{char}}: Hello."
    )
    chat = [{"role": "assistant", "content": "The horn sounds."}, {"role": "user", "content": "Room for one?"}]
    body = build_body(card, chat, settings=Settings(names_behavior="completion", squash_system_messages=True, seed=7))
    assert body["messages"][0] == {
        "role": "system",
        "content": "Write Mira's next reply in a fictional chat between Mira and User.\nMira pilots a ferry.",
    }
    assert body["messages"][1:4] == [
        {"role": "system", "content": "[Example Chat]"},
        {"role": "system", "content": "Hi", "name": "example_user"},
        {"role": "system", "content": "Hello.", "name": "example_assistant"},
    ]
    assert body["messages"][-1] == {"role": "user", "content": "Room for one?", "name": "User"}
    assert list(body)[-1] == "seed" and body["seed"] == 7
