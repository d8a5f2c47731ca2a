"""cProfile of a running service: its event-loop thread and its writer and projector threads, each profiled
from its own thread; the top functions go to stderr (and the raw stats to CHANGJI_BENCH_PROFILE_DIR)."""

from __future__ import annotations

import asyncio
import os
import sys

from _common import log

from api.bootstrap import Service


class Profiler:
    """cProfile on the loop thread and on the service's writer and projector threads (each thread
    needs its own profiler, enabled from that thread)."""

    def __init__(self, service: Service) -> None:
        import cProfile

        self.service = service
        self.pools = {"writer": service.executor._writer, "projector": service.read_side._projector}  # its own pools
        self.profiles = {name: cProfile.Profile() for name in ("loop", *self.pools)}

    @classmethod
    async def start(cls, service: Service) -> Profiler:
        self = cls(service)
        loop = asyncio.get_running_loop()
        for name, pool in self.pools.items():
            await loop.run_in_executor(pool, self.profiles[name].enable)
        self.profiles["loop"].enable()
        return self

    async def stop(self) -> None:
        import pstats

        self.profiles["loop"].disable()
        loop = asyncio.get_running_loop()
        for name, pool in self.pools.items():
            await loop.run_in_executor(pool, self.profiles[name].disable)
        dump = os.environ.get("CHANGJI_BENCH_PROFILE_DIR")  # keep the raw stats for pstats, one file per thread
        for name, profile in self.profiles.items():
            if dump:
                profile.dump_stats(os.path.join(dump, f"turn_overhead.{name}.prof"))
            stats = pstats.Stats(profile, stream=sys.stderr)
            log(f"\n== profile: {name} thread, by own time ==")
            stats.sort_stats("tottime").print_stats(25)
            log(f"== profile: {name} thread, cumulative ==")
            stats.sort_stats("cumtime").print_stats(35)
