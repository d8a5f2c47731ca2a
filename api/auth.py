"""Bearer keys → tenants, with known keys remembered for a while (a revoked key stops within that time)."""

from __future__ import annotations

import time

from service.executor import Executor
from storage.service_db import ServiceData, hash_key

KEY_CACHE_SECONDS = 30.0


class Authenticator:
    def __init__(self, keys: ServiceData, executor: Executor, remember_seconds: float = KEY_CACHE_SECONDS) -> None:
        self.keys, self.executor, self.remember_seconds = keys, executor, remember_seconds
        self._tenants: dict[str, tuple[str, float]] = {}  # key hash → (tenant, until)

    async def authenticate(self, key: str) -> str | None:
        """The tenant of an API key, or None. Known keys are remembered for `remember_seconds`, so a key
        revoked from the CLI stops working within that time."""
        digest = hash_key(key)
        now = time.monotonic()
        hit = self._tenants.get(digest)
        if hit is not None and hit[1] > now:
            return hit[0]
        tenant = await self.executor.query(self.keys.tenant_for, key)
        if tenant is not None:
            self._tenants[digest] = (tenant, now + self.remember_seconds)
        else:
            self._tenants.pop(digest, None)
        return tenant
