"""The front end of the proxy tests, on an engine-mode service without an embedder, the fake model upstream."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.e2e.proxy_front_end.front_end import Front
from tests.fake_model import MakeEngine


@pytest.fixture
async def front(make_engine: MakeEngine) -> AsyncIterator[Front]:
    played = Front(await make_engine(embedder="none"))
    yield played
    await played.client.close()
