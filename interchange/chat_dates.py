"""The dates of SillyTavern chat files: a message's `send_date` read in any of the forms SillyTavern has written,
and the forms this project writes (a message's date, the header's `create_date`).

Reading: `send_date` parses to an aware UTC datetime (naive forms taken as UTC): SillyTavern's "December 1, 2024
3:04pm" (month names full or abbreviated, am/pm optional, seconds optional), ISO 8601 ("2024-12-01 15:04:00",
"2024-12-01T15:04:00Z"), its file-name form "2024-12-01@15h04m00s" (also "2024-12-1 @15h 04m 00s 120ms"), and
epoch milliseconds as a number or a string of digits. Anything else is None, never an error.

Writing: a message's date in the form SillyTavern's `getMessageTimeStamp` writes ("December 1, 2024 3:04pm"), in
UTC (the form carries no zone; SillyTavern writes local time, and the reader takes it as UTC), so a round trip
keeps dates to the minute; `create_date` in the file-name form ("2024-12-01@15h04m00s").
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH_NUMBERS = {name.lower(): number for number, name in enumerate(_MONTHS, 1)} | {
    name[:3].lower(): number for number, name in enumerate(_MONTHS, 1)
}
_MONTH_NUMBERS["sept"] = 9
_FLAGS = re.IGNORECASE | re.ASCII
_MONTH_FORM = re.compile(
    r"(?P<month>[a-z]+)\.?\s+(?P<day>\d{1,2}),?\s+(?P<year>\d{4}),?\s+(?P<hour>\d{1,2}):(?P<minute>\d{2})"
    r"(?::(?P<second>\d{2}))?\s*(?:(?P<half>[ap])\.?m\.?)?",
    _FLAGS,
)
_AT_FORM = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})\s*@\s*(?P<hour>\d{1,2})h\s*(?P<minute>\d{1,2})m"
    r"(?:\s*(?P<second>\d{1,2})s)?(?:\s*(?P<ms>\d{1,3})\s*ms)?",
    _FLAGS,
)
_DASHED_FORM = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})"
    r"(?:[T\s]+(?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:\.(?P<fraction>\d{1,6})\d*)?)?)?",
    _FLAGS,
)
_DIGITS = re.compile(r"-?\d{1,16}", re.ASCII)


def parse_send_date(value: Any) -> datetime | None:
    """A `send_date` in any of the forms read, as an aware UTC datetime; None when it is none of them."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return _from_epoch_ms(value)
    if isinstance(value, str):
        return _from_text(value.strip())
    return None


def _from_epoch_ms(value: float) -> datetime | None:
    try:
        return datetime.fromtimestamp(value / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _from_text(text: str) -> datetime | None:
    if _DIGITS.fullmatch(text):
        return _from_epoch_ms(int(text))
    return (
        _from_iso(text) or _from_month_form(text) or _from_numbers(_AT_FORM, text) or _from_numbers(_DASHED_FORM, text)
    )


def _from_iso(text: str) -> datetime | None:
    try:
        return _as_utc(datetime.fromisoformat(text))
    except (ValueError, OverflowError):
        return None


def _from_month_form(text: str) -> datetime | None:
    match = _MONTH_FORM.fullmatch(text)
    month = _MONTH_NUMBERS.get(match["month"].lower()) if match else None
    if match is None or month is None:
        return None
    hour = _clock_hour(int(match["hour"]), match["half"])
    if hour is None:
        return None
    return _moment(int(match["year"]), month, int(match["day"]), hour, int(match["minute"]), match["second"])


def _clock_hour(hour: int, half: str | None) -> int | None:
    if half is None:
        return hour
    if not 1 <= hour <= 12:
        return None
    return hour % 12 + (12 if half.lower() == "p" else 0)


def _from_numbers(form: re.Pattern[str], text: str) -> datetime | None:
    match = form.fullmatch(text)
    if match is None:
        return None
    parts = match.groupdict()
    micros = _micros(parts.get("fraction"), parts.get("ms"))
    year, month, day = int(parts["year"]), int(parts["month"]), int(parts["day"])
    return _moment(year, month, day, int(parts["hour"] or 0), int(parts["minute"] or 0), parts["second"], micros)


def _micros(fraction: str | None, millis: str | None) -> int:
    if fraction:
        return int(fraction.ljust(6, "0"))
    return int(millis) * 1000 if millis else 0


def _moment(
    year: int, month: int, day: int, hour: int, minute: int, second: str | None, micros: int = 0
) -> datetime | None:
    try:
        return datetime(year, month, day, hour, minute, int(second or 0), micros, tzinfo=UTC)
    except ValueError:
        return None


def _as_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def humanized(moment: datetime) -> str:
    """A message's `send_date` as SillyTavern writes it: "December 1, 2024 3:04pm", in UTC."""
    utc = _as_utc(moment)
    half = "pm" if utc.hour >= 12 else "am"
    return f"{_MONTHS[utc.month - 1]} {utc.day}, {utc.year} {utc.hour % 12 or 12}:{utc.minute:02d}{half}"


def file_date(moment: datetime) -> str:
    """A chat's `create_date` in SillyTavern's file-name form: "2024-12-01@15h04m00s", in UTC."""
    utc = _as_utc(moment)
    return f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}@{utc.hour:02d}h{utc.minute:02d}m{utc.second:02d}s"
