"""The `changji import` command: a chat without --card is refused while the card beside it is kept, and a
chat with --card becomes a story of that card."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

import pytest

from api.settings import Settings
from domain.application import Changji
from interchange.cards import read_card
from tests.e2e.chat_import_support import header, jsonl, message
from tests.processes import run
from tests.shared_data import cards_dir


@dataclass
class CliData:
    data_dir: Path
    chat: Path
    card_id: str
    first: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def cli_data(tmp_path_factory: pytest.TempPathFactory) -> CliData:
    """One `changji import` of a card and a chat without --card: the card is imported, the chat refused."""
    folder = tmp_path_factory.mktemp("cli")
    png = cards_dir() / "default_Seraphina.png"
    greeting = read_card(png.read_bytes()).data["first_mes"]
    rows = [header() | {"character_name": "Seraphina"}, message(greeting, 0, user=False) | {"name": "Seraphina"}]
    for i in range(1, 4):
        rows += [message(f"Question {i}?", 2 * i - 1, user=True), message(f"Answer {i}.", 2 * i, user=False)]
    rows[-1] |= {"swipes": ["Answer 3, first.", "Answer 3."], "swipe_id": 1}
    chat = folder / "glade.jsonl"
    chat.write_bytes(jsonl(*rows))
    result = run("import", "--data-dir", str(folder / "data"), str(png), str(chat))
    found = re.search(r"^card\s+([0-9a-f-]{36})\s+Seraphina", result.stdout, re.MULTILINE)
    assert found, (result.stdout, result.stderr)
    return CliData(folder / "data", chat, found[1], result)


@pytest.mark.slow
def test_the_import_command_refuses_a_chat_without_card_and_keeps_the_card(cli_data: CliData) -> None:
    result = cli_data.first
    assert result.returncode != 0
    assert "--card" in result.stderr and "glade.jsonl" in result.stderr
    assert "1 of 2 file(s) refused" in result.stderr
    app = Changji(env=Settings(data_dir=cli_data.data_dir).event_store_env())
    try:
        assert app.card("local", UUID(cli_data.card_id)).data.name == "Seraphina"
    finally:
        app.close()


@pytest.mark.slow
def test_the_import_command_makes_a_story_of_the_card(cli_data: CliData) -> None:
    result = run("import", "--data-dir", str(cli_data.data_dir), "--card", cli_data.card_id, str(cli_data.chat))
    assert result.returncode == 0, result.stderr
    found = re.search(r"^story\s+[0-9a-f-]{36}\s+glade: (\d+) messages, (\d+) nodes", result.stdout, re.MULTILINE)
    assert found, result.stdout
    assert (int(found[1]), int(found[2])) == (6, 8)  # 3 turns; the root and one more swipe
