"""A failed or skipped job done again at the user's word (`POST /v1/jobs/{id}/retry`): due at once,
its attempts counted afresh, run by the job system like any other; refused (422) while due or once done."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from providers.fake_server import FakeModelServer, Status, Step
from tests.builders import OTHER_TENANT, TENANT, MakeClient, api_for
from tests.scene_support import FAST_JOBS, answer, jobs, scene, settled, side_model

pytestmark = pytest.mark.both_stores


class Switch:
    """A side model that answers 500 until it is switched on."""

    def __init__(self) -> None:
        self.up = False

    def __call__(self, body: Mapping[str, Any]) -> Step:
        return answer({"location": "灯塔"}) if self.up else Status(500)


async def test_a_failed_scribe_job_done_again_records_its_patch(make_client: MakeClient) -> None:
    switch = Switch()
    async with FakeModelServer(switch) as side:
        client = await make_client(side_model=side_model(side), job_max_attempts=2, **FAST_JOBS)
        api = api_for(client, TENANT)
        story = await api.story(pack_turns=0)
        _, reply = await api.turn(story["id"], "去哪儿？", "去灯塔。")
        failed = (await settled(api, story["id"], [reply]))[reply]
        assert failed["status"] == "failed" and failed["attempts"] == 2
        assert (await scene(api, story["id"]))["state"]["location"] == ""

        switch.up = True
        job = await api.call("POST", f"/v1/jobs/{failed['id']}/retry", status=202)
        assert job["id"] == failed["id"] and job["status"] in ("pending", "running")
        assert job["attempts"] == 0 and "failed" in job["detail"]
        done = (await settled(api, story["id"], [reply]))[reply]
        assert done["status"] == "done"
        assert (await scene(api, story["id"]))["state"]["location"] == "灯塔"

        refused = await api.call("POST", f"/v1/jobs/{failed['id']}/retry", status=422)
        assert "done" in refused["detail"]
        await client.close()


async def test_a_skipped_job_may_be_retried_and_nobody_elses_job_is_found(make_client: MakeClient) -> None:
    client = await make_client(**FAST_JOBS)  # no side model: every scribe job is skipped
    api, other = api_for(client, TENANT), api_for(client, OTHER_TENANT)
    story = await api.story(pack_turns=0)
    _, reply = await api.turn(story["id"], "你好。", "嗯。")
    skipped = (await settled(api, story["id"], [reply]))[reply]
    assert skipped["status"] == "skipped"

    await other.call("POST", f"/v1/jobs/{skipped['id']}/retry", status=404)
    job = await api.call("POST", f"/v1/jobs/{skipped['id']}/retry", status=202)
    assert job["attempts"] == 0
    again = (await settled(api, story["id"], [reply]))[reply]
    assert again["status"] == "skipped"  # (still no side model: skipped again, and said why)
    assert len(await jobs(api, story["id"], status="skipped")) == 1


@pytest.mark.parametrize("job_id", ["scribe:not-a-uuid", "nothing:00000000-0000-0000-0000-000000000000", "x"])
async def test_a_job_id_that_names_no_job_is_404(make_client: MakeClient, job_id: str) -> None:
    api = api_for(await make_client(), TENANT)
    problem = await api.call("POST", f"/v1/jobs/{job_id}/retry", status=404)
    assert problem["status"] == 404
