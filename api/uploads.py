"""Files posted to the import routes: the raw body, or the first file of a multipart/form-data body, under
the import size limit (`CHANGJI_IMPORT_MAX_BYTES`; real cards with their art run to several MiB, far over
the API's 1 MiB limit for JSON bodies)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from email.message import Message
from email.parser import BytesParser
from email.policy import HTTP

from aiohttp import web

from api.errors import BadRequestError
from api.http import read_body


@dataclass(frozen=True, slots=True)
class Upload:
    data: bytes
    filename: str | None


MAX_PARTS = 16  # a form with one file, and perhaps a few small fields


async def upload(request: web.Request) -> Upload:
    raw = await read_body(request)
    if request.content_type == "multipart/form-data":
        return await asyncio.to_thread(_first_file, raw, request.headers.get("Content-Type", ""))
    if not raw:
        raise BadRequestError(422, "the file is missing: send it as the body, or as a multipart/form-data file", "body")
    return Upload(raw, None)


def _first_file(raw: bytes, content_type: str) -> Upload:
    """The form's file part: the one with a filename, or the only part there is."""
    boundary = Message()
    boundary["Content-Type"] = content_type
    marker = boundary.get_param("boundary")
    if not isinstance(marker, str) or not marker:
        raise BadRequestError(422, "a multipart body needs a boundary in its Content-Type", "header.Content-Type")
    try:
        delimiter = b"\n--" + marker.encode("latin-1")
    except UnicodeEncodeError:
        raise BadRequestError(422, "the multipart boundary must be ASCII", "header.Content-Type") from None
    if (raw.startswith(delimiter[1:]) + raw.count(delimiter)) > MAX_PARTS + 1:
        raise BadRequestError(422, f"a multipart body may hold at most {MAX_PARTS} parts", "body")
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw
    )
    if not message.is_multipart():
        raise BadRequestError(422, "the multipart body could not be read (is the boundary right?)", "body")
    parts: list[Message] = [part for part in message.iter_parts() if isinstance(part, Message)]
    files = [p for p in parts if p.get_filename()] or (parts if len(parts) == 1 else [])
    if not files:
        raise BadRequestError(422, "the multipart body holds no file part (a part with a filename)", "body")
    data = files[0].get_payload(decode=True)
    if not isinstance(data, bytes) or not data:
        raise BadRequestError(422, "the multipart file is empty", "body")
    return Upload(data, files[0].get_filename())
