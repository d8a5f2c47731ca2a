"""E2E fixtures: the real aiohttp app on a loopback TestServer, with one API key per tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp.web_app
import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.app import create_app
from api.server import Runner
from api.settings import Settings
from providers.fake_server import FakeModelServer
from tests.builders import OTHER_TENANT, TENANT, Api, MakeClient, api_for
from tests.fake_model import MakeEngine, main_model


@pytest.fixture(autouse=True)
def _apps_let_go() -> Iterator[None]:
    """After each test, aiohttp's cache of built middleware chains is emptied: it is keyed by the
    applications a request went through and keeps up to 1,024 chains, so every test's application and
    service (some 30 MB each) would stay alive long after it closed — 10 GB over this directory. A
    server runs one application for its lifetime; only a run of many tests meets this."""
    yield
    cached = getattr(aiohttp.web_app, "_cached_build_middleware", None)
    if cached is not None and hasattr(cached, "cache_clear"):
        cached.cache_clear()


class ServiceTestServer(TestServer):
    """aiohttp's test server with the runner the service serves with (`api/server.py`)."""

    async def _make_runner(self, **kwargs: Any) -> Runner:
        return Runner(self.app, **kwargs)


@pytest.fixture
async def make_client(tmp_path: Path, database_url: str | None) -> AsyncIterator[MakeClient]:
    """Services on the test's store: each with a data dir of its own, on SQLite or one database."""
    clients: list[TestClient[Any, Any]] = []

    async def make(**settings: Any) -> TestClient[Any, Any]:
        settings.setdefault("database_url", database_url)
        app = create_app(Settings(data_dir=tmp_path / f"data-{len(clients)}", **settings))
        client: TestClient[Any, Any] = TestClient(ServiceTestServer(app))
        clients.append(client)
        await client.start_server()
        return client

    yield make
    for client in clients:
        await client.close()


@pytest.fixture
async def client(make_client: MakeClient) -> TestClient[Any, Any]:
    return await make_client()


@pytest.fixture
def api(client: TestClient[Any, Any]) -> Api:
    return api_for(client, TENANT)


@pytest.fixture
def other(client: TestClient[Any, Any]) -> Api:
    return api_for(client, OTHER_TENANT)


@pytest.fixture
async def story(api: Api) -> dict[str, Any]:
    return await api.story()


# --- engine mode: the main model is the fake model server on loopback ---------------------------


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


@pytest.fixture
def make_engine(fake: FakeModelServer, make_client: MakeClient) -> MakeEngine:
    """A service whose main model is `fake` (torn down before the fake server), as one tenant's Api."""

    async def make(max_retries: int = 2, read_timeout: float = 5.0, **settings: Any) -> Api:
        model = main_model(fake, max_retries=max_retries, read_timeout=read_timeout)
        return api_for(await make_client(main_model=model, **settings), TENANT)

    return make


@pytest.fixture
async def engine(make_engine: MakeEngine) -> Api:
    return await make_engine()


@pytest.fixture
async def engine_story(engine: Api) -> dict[str, Any]:
    return await engine.story()
