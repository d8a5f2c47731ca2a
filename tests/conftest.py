"""Fixtures shared by every layer; builders live in tests/builders.py.

The tests that touch storage run on both stores: a test module marked `both_stores` runs each of its
tests once on SQLite and once on PostgreSQL (the `store` parameter; `database_url` is None on SQLite,
a new empty database on PostgreSQL). Every other test runs on SQLite.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from domain.application import Changji
from tests.builders import StoryBuilder, memory_app
from tests.postgres_server import ENV_REQUIRED, ENV_URL, GivenServer, PrivateServer

STORES = ("sqlite", "postgresql")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "both_stores: run each test on SQLite and on PostgreSQL")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_stores"):
        metafunc.parametrize("store", STORES, indirect=True)


@pytest.fixture
def store(request: pytest.FixtureRequest) -> str:
    """Which store the test runs on (SQLite unless its module is marked `both_stores`)."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[GivenServer | PrivateServer]:
    given = os.environ.get(ENV_URL)
    server: GivenServer | PrivateServer = GivenServer(given) if given else PrivateServer()
    if isinstance(server, PrivateServer):
        try:
            server.start()
        except FileNotFoundError as missing:
            server.stop()
            if os.environ.get(ENV_REQUIRED) == "1":
                pytest.fail(f"{ENV_REQUIRED}=1 and {missing}")
            pytest.skip(str(missing))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def database_url(store: str, request: pytest.FixtureRequest) -> str | None:
    """None on SQLite; on PostgreSQL, a new empty database of the session's server."""
    if store == "sqlite":
        return None
    server: GivenServer | PrivateServer = request.getfixturevalue("postgres_server")
    return server.new_database()


@pytest.fixture
def app() -> Changji:
    return memory_app()


@pytest.fixture
def story(app: Changji) -> StoryBuilder:
    return StoryBuilder.start(app)
