"""Engine mode for the lore tests, the main model played by the fake server, without an embedder."""

from __future__ import annotations

import pytest

from tests.builders import Api
from tests.fake_model import MakeEngine


@pytest.fixture
async def engine(make_engine: MakeEngine) -> Api:
    """Engine mode without an embedder: lore needs none, and loading one would only slow these tests down."""
    return await make_engine(embedder="none")
