"""A failed or skipped job done again at the user's word (`POST /v1/jobs/{id}/retry`): due at once,
its attempts counted afresh, run by the job system like any other; refused (422) while due or once done."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from providers.fake_server import FakeModelServer, Status, Step
from tests.builders import OTHER_TENANT, TENANT, Api, MakeClient, api_for
from tests.scene_support import FAST_JOBS, answer, jobs, ledger_of, scene, settled, side_model, turn_of

pytestmark = pytest.mark.both_stores


class Switch:
    """A side model that answers 500 until it is switched on; then each reply's scene patch appends the
    reply's own words to the plot threads (so the order the patches were computed in shows)."""

    def __init__(self) -> None:
        self.up = False

    def __call__(self, body: Mapping[str, Any]) -> Step:
        if not self.up:
            return Status(500)
        reply = turn_of(body).strip().splitlines()[-1].split("：", 1)[-1]
        return answer({"location": "灯塔", "plot_threads": [*ledger_of(body)["plot_threads"], reply]})


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
        assert job["attempts"] == 0 and "was failed" in job["detail"]
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


@pytest.fixture
def switch() -> Switch:
    return Switch()


@pytest.fixture
async def side(switch: Switch) -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(switch) as server:
        yield server


async def failed_path(
    make_client: MakeClient, side: FakeModelServer, switch: Switch
) -> tuple[Api, str, list[str], dict[str, Any]]:
    """A story whose three replies' scribe jobs failed for good (the side model down), then the model back."""
    client = await make_client(side_model=side_model(side), job_max_attempts=1, **FAST_JOBS)
    api = api_for(client, TENANT)
    story = await api.story(pack_turns=0)
    replies = [(await api.turn(story["id"], f"第{i}问", f"第{i}答"))[1] for i in (1, 2, 3)]
    failed = await settled(api, story["id"], replies)
    assert [failed[r]["status"] for r in replies] == ["failed"] * 3
    switch.up = True
    return api, story["id"], replies, failed


async def test_a_paths_jobs_retried_oldest_first_patch_in_path_order(
    make_client: MakeClient, side: FakeModelServer, switch: Switch
) -> None:
    api, story_id, replies, failed = await failed_path(make_client, side, switch)
    for reply in replies:
        await api.call("POST", f"/v1/jobs/{failed[reply]['id']}/retry", status=202)
    done = await settled(api, story_id, replies)
    assert [done[r]["status"] for r in replies] == ["done"] * 3
    assert (await scene(api, story_id))["state"]["plot_threads"] == ["第1答", "第2答", "第3答"]


async def test_jobs_retried_newest_first_keep_their_places_and_all_run(
    make_client: MakeClient, side: FakeModelServer, switch: Switch
) -> None:
    """Retried in any order, none waits forever on another: each keeps its place in the queue (a retried job
    whose predecessor has not been retried yet runs on the scene without that one's patch, as it did)."""
    api, story_id, replies, failed = await failed_path(make_client, side, switch)
    for reply in reversed(replies):  # (as the jobs tab lists them: newest first)
        await api.call("POST", f"/v1/jobs/{failed[reply]['id']}/retry", status=202)
    done = await settled(api, story_id, replies)
    assert [done[r]["status"] for r in replies] == ["done"] * 3
    assert [done[r]["seq"] for r in replies] == [failed[r]["seq"] for r in replies]
    assert [done[r]["created_at"] for r in replies] == [failed[r]["created_at"] for r in replies]


async def test_a_job_never_due_is_not_found(make_client: MakeClient) -> None:
    api = api_for(await make_client(**FAST_JOBS), TENANT)
    story = await api.story(pack_turns=0)
    _, reply = await api.turn(story["id"], "你好。", "嗯。")
    problem = await api.call("POST", f"/v1/jobs/compact:{reply}/retry", status=404)
    assert "no compact job" in problem["detail"]


@pytest.mark.parametrize("job_id", ["scribe:not-a-uuid", "nothing:00000000-0000-0000-0000-000000000000", "x"])
async def test_a_job_id_that_names_no_job_is_404(make_client: MakeClient, job_id: str) -> None:
    api = api_for(await make_client(), TENANT)
    problem = await api.call("POST", f"/v1/jobs/{job_id}/retry", status=404)
    assert problem["status"] == 404
