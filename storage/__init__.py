"""Storage adapters: the SQLite event store, WAL checkpoints off the write path, the service database (keys, idempotency)."""
