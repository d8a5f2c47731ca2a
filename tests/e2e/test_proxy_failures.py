"""A proxied request the upstream fails records nothing: no reply, no story; the error says what happened,
and `/v1/models` fails too. Once the upstream answers, the same request goes on as if nothing had failed."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient

from api.app import create_app
from api.settings import ModelSettings, Settings
from providers.fake_server import FakeModelServer, Status, Text
from tests.builders import TENANT, Api, api_for
from tests.e2e.conftest import ServiceTestServer

MESSAGES = [
    {"role": "system", "content": "You are Mira, a ferry pilot."},
    {"role": "assistant", "content": "The ferry horn sounds."},
    {"role": "user", "content": "Is there room for one more?"},
]


def closed_port() -> int:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        return int(held.getsockname()[1])


async def served(tmp_path: Path, base_url: str) -> Api:
    model = ModelSettings(base_url=base_url, model="fake-model", max_retries=0, read_timeout=5.0)
    app = create_app(Settings(data_dir=tmp_path / "data", embedder="none", main_model=model))
    client: TestClient[Any, Any] = TestClient(ServiceTestServer(app))
    await client.start_server()
    return api_for(client, TENANT)


async def post(api: Api, stream: bool) -> tuple[int, dict[str, Any] | str, dict[str, str]]:
    body = {"model": "fake-model", "messages": MESSAGES, "stream": stream}
    async with api.client.post("/v1/chat/completions", json=body, headers=api.headers) as response:
        data = await response.json() if response.content_type == "application/json" else await response.text()
        return response.status, data, dict(response.headers)


async def test_an_upstream_that_cannot_be_reached_leaves_no_story_and_says_so(tmp_path: Path) -> None:
    api = await served(tmp_path, f"http://127.0.0.1:{closed_port()}/v1")
    try:
        for stream in (False, True):
            status, data, headers = await post(api, stream)
            assert status == 502 and isinstance(data, dict)
            assert "could not be reached" in data["error"]["message"] and "X-Changji-Story" not in headers
        assert (await api.call("GET", "/v1/stories"))["items"] == []
        async with api.client.get("/v1/models", headers=api.headers) as response:
            assert response.status == 502
            assert "could not be reached" in (await response.json())["error"]["message"]
    finally:
        await api.client.close()


async def test_a_5xx_records_nothing_and_the_retry_goes_on_as_if_it_had_not_failed(
    fake: FakeModelServer, tmp_path: Path
) -> None:
    api = await served(tmp_path, fake.url)
    try:
        fake.script(Status(503))
        status, data, _ = await post(api, False)
        assert status == 502 and isinstance(data, dict)
        assert "failed (503): scripted 503" in data["error"]["message"]  # with what the upstream said
        assert (await api.call("GET", "/v1/stories"))["items"] == []
        fake.script(Text("'Climb aboard.'"))
        status, data, headers = await post(api, False)
        assert status == 200 and headers["X-Changji-Recorded"] == "true"
        path = await api.call("GET", f"/v1/stories/{headers['X-Changji-Story']}/path?limit=100")
        assert [(n["kind"], n["text"]) for n in path["nodes"]] == [
            ("greeting", "The ferry horn sounds."), ("user", "Is there room for one more?"), ("reply", "'Climb aboard.'"),
        ]  # fmt: skip
        assert len((await api.call("GET", "/v1/stories"))["items"]) == 1
    finally:
        await api.client.close()
