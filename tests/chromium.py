"""Debian's chromium, which the browser tests and the web page's benchmark drive (Playwright's own
browser builds cannot be fetched here). Without it they are skipped, unless CHANGJI_REQUIRE_BROWSER=1
(`.ci/run` sets it): then its absence is a failure."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium")
REQUIRED = os.environ.get("CHANGJI_REQUIRE_BROWSER") == "1"


def require_chromium() -> str:
    """The browser's path; a skip (or, where it is required, a failure) without it."""
    if CHROMIUM is None:
        if REQUIRED:
            pytest.fail("CHANGJI_REQUIRE_BROWSER=1 but chromium is missing (apt-get install chromium)")
        pytest.skip("chromium is missing (apt-get install chromium)")
    return CHROMIUM
