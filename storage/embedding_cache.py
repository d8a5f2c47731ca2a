"""Embeddings kept on disk by (embedder, text): a rebuilt recall index, after a restart or a rebuild of
the read models, embeds only passages it has never seen. A cache, not a projection: losing the file
costs time, never data. One connection, used by the recall builder's thread only."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping, Sequence

import numpy as np

log = logging.getLogger(__name__)
CHUNK = 500  # keys per lookup (SQLite's bound parameters)


class EmbeddingCache:
    def __init__(self, path: str) -> None:
        self.path, self.usable = path, True
        self.conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute(
            "create table if not exists vectors (key text primary key, dimensions integer, data blob) without rowid"
        )

    @classmethod
    def open(cls, path: str) -> EmbeddingCache | None:
        """The cache at `path`, or None (recall embeds in memory only) when the file cannot be used."""
        try:
            return cls(path)
        except sqlite3.Error as error:
            log.warning("embeddings file %s not used (%s); recall keeps embeddings in memory only", path, error)
            return None

    def get_many(self, keys: Sequence[str], dimensions: int) -> dict[str, np.ndarray]:
        """The vectors saved under `keys` that have `dimensions` floats; nothing once the file failed."""
        found: dict[str, np.ndarray] = {}
        try:
            for start in range(0, len(keys) if self.usable else 0, CHUNK):
                part = keys[start : start + CHUNK]
                rows = self.conn.execute(
                    f"select key, dimensions, data from vectors where key in ({', '.join('?' for _ in part)})", part
                ).fetchall()
                found.update(
                    (key, np.frombuffer(data, dtype=np.float32))
                    for key, size, data in rows
                    if size == dimensions and len(data) == 4 * dimensions
                )
        except sqlite3.Error as error:
            self._failed(error)
        return found

    def put_many(self, vectors: Mapping[str, np.ndarray]) -> None:
        rows = [(key, int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes()) for key, v in vectors.items()]
        if rows and self.usable:
            try:
                with self.conn:
                    self.conn.executemany(
                        "insert or replace into vectors (key, dimensions, data) values (?, ?, ?)", rows
                    )
            except sqlite3.Error as error:
                self._failed(error)

    def _failed(self, error: sqlite3.Error) -> None:
        """A file that fails after opening (damaged, locked, disk full) costs time, never recall."""
        self.usable = False
        log.warning("embeddings file %s failed (%s); recall keeps embeddings in memory only", self.path, error)

    def close(self) -> None:
        self.conn.close()
