"""The edge runs warning-free under the test settings (filterwarnings = error)."""

from __future__ import annotations

import pytest
from aiohttp import web

from api import keys

pytestmark = pytest.mark.both_stores


def test_tenant_request_key_is_typed_when_stored_on_the_request() -> None:
    # aiohttp 3.14 warns (NotAppKeyWarning) the first time a plain string key is stored on a request;
    # under filterwarnings=error that first authenticated request of a process answers 500.
    assert isinstance(keys.TENANT, web.RequestKey)
