"""A route whose body is optional takes no body at all as `{}`, and refuses one that is only whitespace
(no JSON, and not absent either), as it refuses any other body that is not JSON."""

from __future__ import annotations

import pytest

from tests.builders import Api


@pytest.mark.parametrize(("sent", "status"), [(b"", 201), (b" ", 422), (b"\n\t", 422), (b"{}", 201), (b"nope", 422)])
async def test_an_optional_body_is_absent_or_json(api: Api, sent: bytes, status: int) -> None:
    story = await api.story()
    answer = await api.send("POST", f"/v1/stories/{story['id']}/saves", sent, status,
                            {"Content-Type": "application/json"})  # fmt: skip
    if status == 422:
        assert answer["errors"][0]["field"] == "body"
