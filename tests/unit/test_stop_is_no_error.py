"""A job sweep cancelled by the stop before it began is reported by apscheduler's executor as an error with a
traceback (seen once in CI, 1 run in some dozens of a busy server's stop); the filter the job system puts on
that logger lets every other error through."""

from __future__ import annotations

import asyncio
import logging
import sys

from schedulers.system import _CancelledByStop


def record_of(error: BaseException) -> logging.LogRecord:
    try:
        raise error
    except BaseException:
        return logging.LogRecord("apscheduler.executors.default", logging.ERROR, "", 0, "Error running job",
                                 None, sys.exc_info())  # fmt: skip


def test_a_sweep_cancelled_by_the_stop_is_not_logged_and_any_other_error_is() -> None:
    quiet = _CancelledByStop()
    assert not quiet.filter(record_of(asyncio.CancelledError()))
    assert quiet.filter(record_of(RuntimeError("the read models are gone")))
    assert quiet.filter(logging.LogRecord("x", logging.ERROR, "", 0, "no traceback", None, None))
