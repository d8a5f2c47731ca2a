"""The read models: SQLite tables folded from the event log (rebuildable from position 0)."""
