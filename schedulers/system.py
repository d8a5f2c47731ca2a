"""The background job system: APScheduler runs a sweep; the sweep reads due jobs from the `jobs` read
model and runs each with its kind's worker.

Nothing is held only in memory. A job row is derived from the event that made the work due (as
`domain/tree/jobs.py` declares per kind) and its outcome is an event on the job's node (done, skipped with
a reason, or failed with the error, the attempt and the next retry), so after a crash or restart the
next sweep finds exactly what is still due. Workers are idempotent: the node refuses a second final
outcome, so a job run twice records once.

Jobs of one story and kind run one at a time, oldest first (so one story's backlog never holds up
another's, and a path's jobs run in path order). Failures retry with exponential backoff and jitter
until `max_attempts`, then the job is `failed` for good. A worker may also answer `Waiting` (something
it depends on is not settled yet); it is then looked at again when another job settles or at the next
sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from domain.application import Changji
from domain.tree.jobs import JOBS
from domain.values import JobKind
from projections.read_models.rows import job_time
from projections.read_models.store import ReadModels
from schedulers.outcomes import Failed, Outcome, Skipped, Waiting
from service.executor import Executor
from service.read_side import ReadSide

log = logging.getLogger(__name__)
SWEEP = "changji-sweep"
SKIP_BATCH = 500


@dataclass(frozen=True, slots=True)
class JobPolicy:
    sweep_seconds: float = 2.0
    retry_seconds: float = 5.0
    retry_cap_seconds: float = 600.0
    max_attempts: int = 5
    concurrency: int = 4

    def retry_at(self, attempt: int, now: datetime) -> datetime | None:
        """When to try again after failed attempt number `attempt` (None: give up)."""
        if attempt >= self.max_attempts:
            return None
        delay = min(self.retry_cap_seconds, self.retry_seconds * 2 ** (attempt - 1))
        return now + timedelta(seconds=delay * random.uniform(0.5, 1.0))


class Worker(Protocol):
    @property
    def kind(self) -> JobKind: ...

    @property
    def skip_reason(self) -> str | None:
        """Set when this worker cannot do its work at all (e.g. no model configured): its due jobs are
        then skipped in batches at the regular sweep, without hurrying."""

    async def run(self, job: Mapping[str, Any]) -> Outcome: ...


class _CancelledByStop(logging.Filter):
    """A sweep cancelled by the stop before it began (its task cancelled while apscheduler still held it)
    is reported by apscheduler's executor as an error with a traceback; the stop is no error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


class JobSystem:
    def __init__(
        self,
        app: Changji,
        store: ReadModels,
        executor: Executor,
        read_side: ReadSide,
        workers: Sequence[Worker],
        policy: JobPolicy | None = None,
    ) -> None:
        """One worker per kind `domain.tree.jobs` declares (a kind without one is refused). The job system
        listens to the read side: new job rows a worker can do make it sweep at once."""
        self.app, self.store, self.executor, self.read_side = app, store, executor, read_side
        self.workers: dict[JobKind, Worker] = {worker.kind: worker for worker in workers}
        missing = sorted(set(JOBS) - set(self.workers))
        if missing:
            raise ValueError(f"no worker for the job kind(s) {', '.join(missing)}")
        self.policy = policy or JobPolicy()
        self.scheduler = AsyncIOScheduler(timezone=UTC)
        self.running: dict[str, asyncio.Task[None]] = {}
        self.waiting: dict[str, str] = {}  # job id → what it waits on (as of its last look)
        self._sweeping = False
        self._sweep_task: asyncio.Task[None] | None = None  # the sweep in flight
        self._again = False
        self._stopping = False
        self._finishes = 0  # jobs finished in this process, and when (by that count): a job that finished
        self._finished: dict[str, int] = {}  # while the due list was being read is not started again
        self._rows_seen = 0
        read_side.on_synced(self._new_rows)

    def _new_rows(self) -> None:
        """After a catch-up: new job rows a worker can do now (folded by this process or another one
        serving the same files) → sweep now, not at the next tick."""
        added = sum(self.store.jobs_added[kind] for kind in self.eager_kinds)
        if added != self._rows_seen:
            self._rows_seen = added
            self.kick()

    async def start(self) -> None:
        # a sweep waiting on a long read-model catch-up makes the next tick "skipped": expected, not news;
        # and a line per sweep ("Running job …") would drown the service's own log
        logging.getLogger("apscheduler.scheduler").setLevel(logging.ERROR)
        executor_log = logging.getLogger("apscheduler.executors.default")
        executor_log.setLevel(logging.WARNING)
        if not any(isinstance(f, _CancelledByStop) for f in executor_log.filters):
            executor_log.addFilter(_CancelledByStop())
        self.scheduler.add_job(
            self.sweep,
            "interval",
            seconds=self.policy.sweep_seconds,
            id=SWEEP,
            next_run_time=datetime.now(UTC),
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )
        self.scheduler.start()

    async def stop(self) -> None:
        """Stop sweeping and cancel jobs in flight; they are still due, so the next start runs them."""
        self._stopping = True
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        for _ in range(500):  # a sweep in flight starts nothing more once it sees the flag
            if not self._sweeping:
                break
            await asyncio.sleep(0.01)
        sweeping = self._sweep_task  # (one still waiting on a read: ended here, not by the loop's teardown)
        if sweeping is not None and not sweeping.done():
            sweeping.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sweeping
        tasks = list(self.running.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    @property
    def eager_kinds(self) -> list[JobKind]:
        """Kinds whose new jobs are worth a sweep right away (their worker can do the work); the others
        are skipped in batches at the regular sweep."""
        return [kind for kind, worker in self.workers.items() if worker.skip_reason is None]

    def kick(self) -> None:
        """Sweep now (new work arrived, or a job settled and may have unblocked another)."""
        if self._stopping:
            return
        if self._sweeping:
            self._again = True
        elif self.scheduler.running:
            with contextlib.suppress(Exception):
                self.scheduler.modify_job(SWEEP, next_run_time=datetime.now(UTC))

    async def sweep(self) -> None:
        self._sweeping = True
        self._sweep_task = asyncio.current_task()
        try:
            while True:
                self._again = False
                await self._sweep_once()
                if not self._again:
                    break
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            log.debug("a job sweep was cancelled by the stop")  # (the jobs it had not started stay due)
        except Exception:
            log.exception("job sweep failed; retrying at the next sweep")
        finally:
            self._sweeping, self._sweep_task = False, None

    async def _sweep_once(self) -> None:
        await self.read_side.sync()
        now = job_time(datetime.now(UTC))
        for worker in self.workers.values():
            if worker.skip_reason is not None:
                await self._skip_all(worker.kind, worker.skip_reason, now)
        room = self.policy.concurrency - len(self.running)
        if room <= 0:
            return
        mark = self._finishes
        kinds = [kind for kind, worker in self.workers.items() if worker.skip_reason is None]
        due = await self.executor.query(self.store.due_jobs, now, room + len(self.running), kinds, True)
        for job in due:
            if room <= 0 or self._stopping:
                break
            if job["id"] in self.running or job["kind"] not in self.workers or self._finished.get(job["id"], 0) > mark:
                continue
            key: str = job["id"]
            task = asyncio.create_task(self._run(job))
            self.running[key] = task
            task.add_done_callback(functools.partial(self._ended, key))
            room -= 1

    async def _skip_all(self, kind: JobKind, reason: str, now: str) -> None:
        while due := await self.executor.query(self.store.due_jobs, now, SKIP_BATCH, [kind]):
            await self.executor.write(
                self.app.jobs.record_job_skips, [UUID(job["node_id"]) for job in due], kind, reason
            )
            if len(due) < SKIP_BATCH:
                break

    def _ended(self, key: str, _: asyncio.Task[None]) -> None:
        self.running.pop(key, None)
        self._finishes += 1
        self._finished[key] = self._finishes
        if len(self._finished) > 10_000:
            self._finished = {k: n for k, n in self._finished.items() if n > self._finishes - 1000}

    async def _run(self, job: Mapping[str, Any]) -> None:
        node_id, kind = UUID(job["node_id"]), job["kind"]
        try:
            if job.get("story_deleted"):
                outcome: Outcome = Skipped("the story was deleted")
            else:
                outcome = await self.workers[kind].run(job)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a worker bug must not stop the queue: it counts as a failed attempt
            log.exception("%s job for node %s raised", kind, node_id)
            outcome = Failed(f"{type(error).__name__}: {error}")
        if isinstance(outcome, Waiting):
            self.waiting[job["id"]] = outcome.on
            return
        self.waiting.pop(job["id"], None)
        try:
            await self._record(node_id, kind, int(job["attempts"]), outcome)
        except Exception:  # the job stays due: the next sweep runs it again
            log.exception("could not record the outcome of the %s job for node %s", kind, node_id)
        self.kick()

    async def _record(self, node_id: UUID, kind: JobKind, attempts: int, outcome: Outcome) -> None:
        jobs = self.app.jobs
        if isinstance(outcome, Skipped):
            await self.executor.write(jobs.record_job_skip, node_id, kind, outcome.reason, outcome.call)
        elif isinstance(outcome, Failed):
            retry_at = self.policy.retry_at(attempts + 1, datetime.now(UTC))
            await self.executor.write(jobs.record_job_failure, node_id, kind, outcome.error, retry_at, outcome.call)
            log.info("%s job for node %s failed (%s); retry at %s", kind, node_id, outcome.error[:200], retry_at)
