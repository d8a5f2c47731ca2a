"""The locks the processes of one data dir share: the event store's write lock (one writer at a time,
reentrant within a process, a waiter woken when it is let go) and the leader's lock (one leader; the
lead passes on when the leader lets go or ends)."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest

from service.leadership import Duty, Leadership
from storage.leadership import LeaderLock
from storage.write_lock import WriteLock


def test_the_write_lock_is_held_by_one_holder_at_a_time_and_wakes_a_waiter(tmp_path: Path) -> None:
    first, second = WriteLock(tmp_path / "events.lock"), WriteLock(tmp_path / "events.lock")  # (two processes' worth)
    order: list[str] = []
    with first:
        with first:  # reentrant
            waiter = threading.Thread(
                target=lambda: (second.__enter__(), order.append("second"), second.__exit__(None, None, None))
            )
            waiter.start()
            time.sleep(0.1)
            assert order == []  # still held (the inner release did not let go)
        time.sleep(0.1)
        assert order == []
        order.append("first done")
    waiter.join(5)
    assert order == ["first done", "second"] and second.waits == 1


def _hold_for(path: str, seconds: float, held: multiprocessing.synchronize.Event) -> None:
    with WriteLock(path):
        held.set()
        time.sleep(seconds)


def test_the_write_lock_holds_across_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "events.lock")
    held = multiprocessing.get_context("spawn").Event()
    other = multiprocessing.get_context("spawn").Process(target=_hold_for, args=(path, 0.5, held))
    other.start()
    try:
        assert held.wait(30)
        started = time.monotonic()
        with WriteLock(path) as lock:
            waited = time.monotonic() - started
        assert waited > 0.2 and lock.waits == 1
    finally:
        other.join(10)


def test_without_a_path_the_write_lock_locks_nothing_but_the_threads_of_this_process() -> None:
    lock = WriteLock(None)
    with lock, lock:
        pass
    assert lock.waits == 0


def test_one_leader_and_the_lead_passes_on_when_it_lets_go(tmp_path: Path) -> None:
    first, second = LeaderLock(tmp_path), LeaderLock(tmp_path)
    assert first.try_take() and first.held
    assert not second.try_take() and not second.held
    first.release()
    assert second.try_take() and not first.try_take()
    second.release()
    assert LeaderLock(None).try_take()  # (an in-memory store: nobody else to lead)


async def test_a_follower_takes_up_the_duties_once_the_leader_stops(tmp_path: Path) -> None:
    started: list[str] = []

    def duty(name: str) -> Duty:
        async def start() -> None:
            started.append(name)

        async def stop() -> None:
            started.remove(name)

        return Duty(name, start, stop)

    leader = Leadership(LeaderLock(tmp_path), [duty("jobs of the first")], retry_seconds=0.05)
    follower = Leadership(LeaderLock(tmp_path), [duty("jobs of the second")], retry_seconds=0.05)
    await leader.start()
    await follower.start()
    assert started == ["jobs of the first"] and leader.leading and not follower.leading
    await leader.stop()
    for _ in range(100):
        if follower.leading:
            break
        await asyncio.sleep(0.02)
    assert started == ["jobs of the second"]
    await follower.stop()
    assert started == [] and not follower.lock.held


@pytest.mark.parametrize("count", [1, 3])
def test_one_of_many_leads_and_the_lock_file_names_its_process(tmp_path: Path, count: int) -> None:
    locks = [LeaderLock(tmp_path) for _ in range(count)]
    assert sum(lock.try_take() for lock in locks) == 1
    assert (tmp_path / "leader.lock").read_text() == f"{os.getpid()}\n"
    for lock in locks:
        lock.release()


async def test_a_leader_whose_duties_fail_to_start_lets_the_lead_go(tmp_path: Path) -> None:
    async def broken() -> None:
        raise RuntimeError("no scheduler today")

    async def nothing() -> None:
        return None

    stopped: list[str] = []

    async def stop_first() -> None:
        stopped.append("first")

    leader = Leadership(
        LeaderLock(tmp_path), [Duty("first", nothing, stop_first), Duty("second", broken, nothing)], 0.05
    )
    await leader.start()
    assert not leader.leading and stopped == ["first"]  # what had started is stopped again
    other = LeaderLock(tmp_path)
    assert other.try_take()  # the lead is free for another process
    other.release()
    await leader.stop()
