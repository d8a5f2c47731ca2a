"""eventsourcing's PostgreSQL application recorder, whose insert is not retried.

eventsourcing retries an insert that failed with a connection or operational error (up to ten times).
A commit can fail that way after the server made it (the connection dropped as the answer came back):
the retry then finds its own rows, and reports a conflict — which a command takes for a race it lost,
and runs again, writing twice. Here such an insert fails once and says so: the request answers with an
error, and a client that retries with its Idempotency-Key gets what the first attempt made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder


class Recorder(PostgresApplicationRecorder):
    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        once = PostgresApplicationRecorder.insert_events.__wrapped__  # (the function the retry wraps)
        result: Sequence[int] | None = once(self, stored_events, **kwargs)
        return result
