"""What a worker answers for a job: done, skipped for a reason, failed (retried), or not yet."""

from __future__ import annotations

from dataclasses import dataclass

from domain.tree.commands.jobs import SideCall


@dataclass(frozen=True, slots=True)
class Done:
    """The worker recorded its result."""


@dataclass(frozen=True, slots=True)
class Skipped:
    reason: str
    call: SideCall | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    error: str
    call: SideCall | None = None


@dataclass(frozen=True, slots=True)
class Waiting:
    """Not yet: something this job depends on is not settled."""

    on: str


Outcome = Done | Skipped | Failed | Waiting
