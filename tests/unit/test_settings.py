"""The service's settings as the environment gives them: read, bounded, and refused with the name at fault."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from api.settings import Settings


def test_recall_vector_wait_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings.from_env().recall_vector_wait == 0.015
    monkeypatch.setenv("CHANGJI_RECALL_VECTOR_WAIT", "0.25")
    assert Settings.from_env().recall_vector_wait == 0.25


@pytest.mark.parametrize("value", ["-1", "60", "soon"])
def test_a_vector_wait_out_of_bounds_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CHANGJI_RECALL_VECTOR_WAIT", value)
    with pytest.raises(ValidationError, match="recall_vector_wait"):
        Settings.from_env()
