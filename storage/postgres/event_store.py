"""eventsourcing's PostgreSQL application recorder, with an insert that is not retried and is one statement
that locks the table.

eventsourcing retries an insert that failed with a connection or operational error (up to ten times).
A commit can fail that way after the server made it (the connection dropped as the answer came back):
the retry then finds its own rows, and reports a conflict — which a command takes for a race it lost,
and runs again, writing twice. Here such an insert fails once and says so: the request answers with an
error, and a client that retries with its Idempotency-Key gets what the first attempt made.

A save is one call of a function on the server (`changji_insert_events`) that locks the events table
and inserts — the lock eventsourcing's own statements take, which keeps every committed set of events
a prefix of the log (ids are taken and committed in one order), in one round trip instead of three
(eventsourcing's own function inserts without the lock).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg.sql import SQL, Identifier

FUNCTION = "changji_insert_events"


class Recorder(PostgresApplicationRecorder):
    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        schema, table = Identifier(datastore.schema), Identifier(self.events_table_name)
        self.pg_function_name_insert_events = FUNCTION
        self.sql_invoke_pg_function_insert_events = SQL("SELECT * FROM {}.{}((%s))").format(
            schema, Identifier(FUNCTION)
        )
        self.sql_create_statements[self.create_insert_function_statement_index] = SQL(
            "CREATE OR REPLACE FUNCTION {schema}.{function}(events {schema}.{row}[]) RETURNS SETOF bigint"
            " LANGUAGE plpgsql AS $$ BEGIN"
            " LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE;"
            " RETURN QUERY INSERT INTO {schema}.{table} (originator_id, originator_version, topic, state)"
            " SELECT e.originator_id, e.originator_version, e.topic, e.state FROM unnest(events) AS e"
            " RETURNING notification_id;"
            " END $$"
        ).format(schema=schema, function=Identifier(FUNCTION), row=Identifier(self.stored_event_type_name), table=table)

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        once = PostgresApplicationRecorder.insert_events.__wrapped__  # (the function the retry wraps)
        result: Sequence[int] | None = once(self, stored_events, **kwargs)
        return result
