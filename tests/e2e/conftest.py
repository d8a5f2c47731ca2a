"""E2E fixtures: the real aiohttp app on a loopback TestServer, with one API key per tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.app import create_app
from api.settings import Settings
from tests.builders import OTHER_TENANT, TENANT, Api, MakeClient, api_for


@pytest.fixture
async def make_client(tmp_path: Path) -> AsyncIterator[MakeClient]:
    clients: list[TestClient[Any, Any]] = []

    async def make(**settings: Any) -> TestClient[Any, Any]:
        app = create_app(Settings(data_dir=tmp_path / f"data-{len(clients)}", **settings))
        client: TestClient[Any, Any] = TestClient(TestServer(app))
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
