"""PostgreSQL as the one store that many `changji serve` processes, on many hosts, share
(`CHANGJI_DATABASE_URL=postgresql://…`): the event store through eventsourcing's own PostgreSQL
persistence, and beside it the service's own tables (API keys, idempotency records, blobs, stop
requests) and its coordination (the write lock and the lead, as advisory locks).

Everything PostgreSQL-specific lives in this package and the composition root (`api/bootstrap.py`);
the domain, the projections and the services do not know which store they are on.
"""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

SCHEMES = ("postgresql", "postgres")


def check_url(url: str) -> str:
    """`url` if it names a PostgreSQL database (`postgresql://user[:password]@host[:port]/database`;
    a socket folder as `?host=/path`), else ValueError saying what is wrong (without the password)."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ValueError(f"a database URL starts with postgresql://, not {parts.scheme or 'nothing'}://")
    if not parts.path.strip("/"):
        raise ValueError("a database URL names its database: postgresql://user@host:5432/database")
    query = parse_qs(parts.query)
    if not (parts.hostname or query.get("host")):
        raise ValueError("a database URL names its host: postgresql://user@host:5432/database")
    if other := sorted(set(query) - {"host"}):
        raise ValueError(
            f"a database URL takes no parameter but host (not {', '.join(other)}): set libpq's environment"
            " variables instead (PGSSLMODE, PGSSLROOTCERT, PGOPTIONS…), which every connection reads"
        )
    try:
        _ = parts.port
    except ValueError:
        raise ValueError("a database URL's port is a number from 1 to 65535") from None
    return url


def event_store_env(url: str, pool_size: int = 5) -> dict[str, str]:
    """eventsourcing's settings for the PostgreSQL event store at `url`."""
    parts = urlsplit(check_url(url))
    query = parse_qs(parts.query)
    return {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "APPLICATION_RECORDER_TOPIC": "storage.postgres.event_store:Recorder",  # (an insert is not retried)
        "POSTGRES_DBNAME": unquote(parts.path.strip("/")),
        "POSTGRES_HOST": query.get("host", [parts.hostname or ""])[0],
        "POSTGRES_PORT": str(parts.port or 5432),
        "POSTGRES_USER": unquote(parts.username or ""),
        "POSTGRES_PASSWORD": unquote(parts.password or ""),
        "POSTGRES_POOL_SIZE": str(pool_size),
        "POSTGRES_CONNECT_TIMEOUT": "10",
        # a save is one statement, a function that locks the table and inserts (`storage/postgres/event_store.py`),
        # with no ping before it (a connection the server dropped fails that request once)
        "POSTGRES_ENABLE_DB_FUNCTIONS": "y",
    }


def redacted(url: str) -> str:
    """The URL without its password, for logs and messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()
