"""A card the proxy makes is named from what the front end sends (`service/front_end_names.py`)."""

from __future__ import annotations

from service.front_end_names import front_end_names

MAIN = "Write Seraphina's next reply in a fictional chat between Seraphina and Anna."


def test_sillytaverns_main_prompt_names_the_character_and_the_user() -> None:
    assert front_end_names([{"role": "system", "content": MAIN}, {"role": "user", "content": "hi"}]) == (
        "Seraphina",
        "Anna",
    )


def test_name_fields_come_first() -> None:
    messages = [{"role": "system", "content": MAIN}, {"role": "assistant", "name": "Mira", "content": "The horn."}]
    assert front_end_names(messages) == ("Mira", "Anna")


def test_a_personality_line_or_the_greetings_speaker_names_the_character() -> None:
    assert front_end_names([{"role": "system", "content": "Seraphina's personality: kind"}])[0] == "Seraphina"
    spoken = [{"role": "system", "content": "You are Mira."}, {"role": "assistant", "content": "Mira: The horn."}]
    assert front_end_names(spoken) == ("Mira", "User")
    numbered = [{"role": "system", "content": "x"}, {"role": "assistant", "content": "Chapter 1: The horn."}]
    assert front_end_names(numbered) == ("Assistant", "User")
