"""Background work as the domain declares it: for each kind of job, the events that make it due for
their node, the event that is its result, and after how many failed attempts its worker falls back
to its offline way. (How often and how long failures are retried is the job system's policy, from
the settings: `schedulers/system.py`.)

This table is the one place a job kind is named. The `Node` aggregate and the `jobs` read model both
fold it (a job is due on the node whose event made it due, and settled by that node's own outcome
events), and the job system runs one worker per kind (`schedulers/workers/`), refusing to start
with a kind that has none. Adding a kind: add its name to `JobKind`, its `JobRule` here, a worker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

from eventsourcing.domain import AggregateEvent

from domain.tree.events import ReplyPosted
from domain.tree.turn_events import ReplySealed
from domain.tree.work_events import CompactionDue, ScenePatched, SideJobRequeued
from domain.values import JobKind, JobState

SETTLED: frozenset[JobState] = frozenset({"done", "skipped", "failed"})
REQUEUED_FROM: frozenset[JobState] = frozenset({"skipped", "failed"})  # what a user may ask to be done again
UNDER_WAY: frozenset[JobState] = frozenset({"pending", "retrying"})


def _no_detail(event: Any) -> str:
    return ""


def _always(event: Any) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class JobRule:
    """One kind of background work."""

    kind: JobKind
    due_on: tuple[type[AggregateEvent], ...]
    """Events that make the work due for the node they happened to (again, if it had settled)."""
    detail: Callable[[Any], str] = _no_detail
    """What the new job row says about why it is due."""
    result_on: tuple[type[AggregateEvent], ...] = ()
    """Events on the node that are the work's own result (they settle the job as done, when `result`
    says so); outcomes recorded as `SideJobDone`, `SideJobSkipped` or `SideJobFailed` settle any kind."""
    result: Callable[[Any], bool] = _always
    fallback_after: int | None = None
    """Failed attempts after which the worker falls back to its offline way (None: it has none)."""


def _by_scribe(event: Any) -> bool:
    return bool(event.author == "scribe")


def _compaction_reason(event: Any) -> str:
    return _requeued(event) if isinstance(event, SideJobRequeued) else str(event.reason)


def _requeued(event: Any) -> str:
    """A job done again: its detail until it runs."""
    return f"to be done again at the user's word (it was {event.was})" if isinstance(event, SideJobRequeued) else ""


JOBS: Mapping[JobKind, JobRule] = {
    "scribe": JobRule(  # the scene patch of a finished reply, by the side model
        "scribe",
        due_on=(ReplySealed, ReplyPosted),
        result_on=(ScenePatched,),
        result=_by_scribe,
        detail=_requeued,
    ),
    "compact": JobRule(  # pack a path's oldest uncovered turns into an episode, fold old episodes into the digest
        "compact",
        due_on=(CompactionDue,),
        detail=_compaction_reason,
        fallback_after=2,
    ),
}

if set(JOBS) != set(get_args(JobKind)):  # pragma: no cover - a declaration error, caught at import
    raise RuntimeError("every JobKind needs its JobRule in domain.tree.jobs.JOBS")

_DUE: dict[type, tuple[JobRule, ...]] = {}
_RESULTS: dict[type, tuple[JobRule, ...]] = {}
for _rule in JOBS.values():
    for _event in _rule.due_on:
        _DUE[_event] = (*_DUE.get(_event, ()), _rule)
    for _event in _rule.result_on:
        _RESULTS[_event] = (*_RESULTS.get(_event, ()), _rule)


def made_due(event: object) -> tuple[JobRule, ...]:
    """The kinds of work an event makes due for its node (a requeue: the kind it names)."""
    if isinstance(event, SideJobRequeued):
        return (JOBS[event.kind],)
    return _DUE.get(type(event), ())


def results_of(event: object) -> tuple[JobKind, ...]:
    """The kinds of work whose result the event is."""
    return tuple(rule.kind for rule in _RESULTS.get(type(event), ()) if rule.result(event))
