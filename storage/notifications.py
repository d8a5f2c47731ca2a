"""The event store's notification log read in bulk, for folding many events at once (a rebuild, a
catch-up after a restart): the same domain events the application's mapper makes, decoded faster.

eventsourcing's mapper decodes each stored event with the standard `json` module and an object hook
in Python; here the rows come straight from SQLite on a connection of their own, their JSON is parsed
by orjson and only the marked values (`{"_type_": …, "_data_": …}`) go through the application's own
transcodings. The result is exactly what `mapper.to_domain_event` returns (tested event for event),
faster. A state whose JSON orjson would read otherwise (integers past 64 bits, NaN, Infinity: a
card's `extensions` may hold them) goes through the mapper. Stores other than SQLite, or a mapper that compresses or encrypts, are read
through the recorder and the mapper as before (`ProjectionRunner` falls back).
"""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any
from uuid import UUID, SafeUUID

import orjson
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import resolve_topic

# JSON that orjson reads otherwise than the standard library (which wrote it): integers of 19 digits
# or more (orjson turns those past 64 bits into floats) — found as a run of 19 digits in the state with
# every digit made "0" and every other byte a space (a translate and a substring search: a regular
# expression over every state took as long as the rest of the decoding) — and NaN / Infinity (orjson
# refuses them: its error sends the state the mapper's way)
_DIGITS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_NUMBER = b"0" * 19

_new, _set, _UNKNOWN = object.__new__, object.__setattr__, SafeUUID.unknown  # (an enum member read once)
StoredRow = tuple[int, str, int, str, bytes]  # notification id, originator id (hex), version, topic, state


def uuid_of(text: str) -> UUID:
    """`UUID(text)` for the 32 hex digits the event store writes, without the general parser (a
    rebuild makes a few hundred thousand of them); anything else through the parser."""
    if len(text) == 32 and text.isascii() and text.isalnum():
        try:
            value = int(text, 16)
        except ValueError:
            return UUID(text)
        made: UUID = _new(UUID)
        _set(made, "int", value)
        _set(made, "is_safe", _UNKNOWN)
        return made
    return UUID(text)


class _Hex:
    decode = staticmethod(uuid_of)


class StoredEvents(ABC):
    """Stored rows of an event store decoded into domain events in bulk; a subclass reads the rows
    (`rows`, `events_of`) from its store."""

    def __init__(self, mapper: Any, table: str = "stored_events") -> None:
        self.table, self.mapper = table, mapper
        transcoder = mapper.transcoder
        self.names: dict[str, Any] = {**transcoder.names, "uuid_hex": _Hex}
        self._classes: dict[str, type] = {}

    @abstractmethod
    def rows(self, start: int, limit: int, stop: int | None = None) -> list[StoredRow]:
        """The stored rows from notification id `start` on (up to `stop`), in order, nothing decoded:
        (notification id, originator id as 32 hex digits, originator version, topic, state)."""

    @abstractmethod
    def events_of(self, originator_ids: Sequence[UUID]) -> list[Any]:
        """The events of those aggregates, each one's in version order, in one query (`Changji.preload`;
        a few hundred ids at a time)."""

    def read(self, start: int, limit: int, stop: int | None = None) -> list[tuple[int, Any]]:
        """Up to `limit` events from notification id `start` on (up to `stop`), in order."""
        return [(row[0], self.event(row)) for row in self.rows(start, limit, stop)]

    def close(self) -> None:
        return None

    def event(self, row: StoredRow) -> Any:
        """The domain event of a stored row."""
        return self._event(row[1], row[2], row[3], row[4])

    def _event(self, originator_id: str, version: int, topic: str, state: bytes) -> Any:
        if _LONG_NUMBER in state.translate(_DIGITS):  # (a card's extensions may hold anything JSON can)
            return self._mapped(originator_id, version, topic, state)
        try:
            values: dict[str, Any] = orjson.loads(state)
        except orjson.JSONDecodeError:  # NaN, Infinity: the standard library reads them
            return self._mapped(originator_id, version, topic, state)
        cls = self._classes.get(topic)
        if cls is None:
            cls = self._classes[topic] = resolve_topic(topic)
        for key, value in values.items():
            if type(value) is dict or type(value) is list:
                values[key] = self._decoded(value)
        values["originator_id"] = uuid_of(originator_id)
        values["originator_version"] = version
        class_version = getattr(cls, "class_version", 1)
        from_version = values.pop("class_version", 1)
        while from_version < class_version:
            getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(values)
            from_version += 1
        event = object.__new__(cls)
        object.__setattr__(event, "__dict__", values)
        return event

    def _mapped(self, originator_id: str, version: int, topic: str, state: bytes) -> Any:
        return self.mapper.to_domain_event(StoredEvent(UUID(originator_id), version, topic, state))

    def _decoded(self, value: Any) -> Any:
        """Marked values by their transcodings, inner ones first (as the JSON object hook does)."""
        if type(value) is list:
            return [self._decoded(v) if type(v) is dict or type(v) is list else v for v in value]
        if type(value) is not dict:
            return value
        for key, inner in value.items():
            if type(inner) is dict or type(inner) is list:
                value[key] = self._decoded(inner)
        if len(value) == 2 and "_type_" in value and "_data_" in value:
            return self.names[value["_type_"]].decode(value["_data_"])
        return value


class SQLiteNotifications(StoredEvents):
    """Reads (notification id, domain event) pairs from an eventsourcing SQLite event store file."""

    def __init__(self, path: str, mapper: Any, table: str = "stored_events") -> None:
        super().__init__(mapper, table)
        self.path = path
        self._conn: sqlite3.Connection | None = None

    @classmethod
    def of(cls, source: Any) -> SQLiteNotifications | None:
        """A reader for an application whose events are in an SQLite file, stored as plain JSON."""
        mapper, recorder = getattr(source, "mapper", None), getattr(source, "recorder", None)
        datastore = getattr(recorder, "datastore", None)
        pool = getattr(datastore, "pool", None)
        path = getattr(pool, "db_name", None)
        if mapper is None or recorder is None or mapper.compressor or mapper.cipher or not isinstance(path, str):
            return None
        if getattr(pool, "is_sqlite_memory_mode", True) or getattr(datastore, "originator_id_type", "") != "uuid":
            return None
        return cls(path, mapper, recorder.events_table_name)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlite3.connect(self.path, check_same_thread=False)  # (reads only)
            self._conn.execute("PRAGMA busy_timeout=5000")
        return self._conn

    def rows(self, start: int, limit: int, stop: int | None = None) -> list[StoredRow]:
        sql = f"SELECT rowid, originator_id, originator_version, topic, state FROM {self.table} WHERE rowid >= ?"
        args: list[int] = [start]
        if stop is not None:
            sql += " AND rowid <= ?"
            args.append(stop)
        rows: list[StoredRow] = self._connection().execute(sql + " ORDER BY rowid LIMIT ?", [*args, limit]).fetchall()
        return rows

    def events_of(self, originator_ids: Sequence[UUID]) -> list[Any]:
        if not originator_ids:
            return []
        ids = [originator_id.hex for originator_id in originator_ids]
        sql = (
            f"SELECT originator_id, originator_version, topic, state FROM {self.table}"
            f" WHERE originator_id IN ({','.join('?' * len(ids))}) ORDER BY originator_id, originator_version"
        )
        return [self._event(*row) for row in self._connection().execute(sql, ids).fetchall()]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
