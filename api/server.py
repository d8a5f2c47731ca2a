"""Serving the app: aiohttp's runner with one change — a request aiohttp's own parser refuses (a control
character in a header, a header past 8,190 bytes, a malformed request line) is answered as problem+json
with a fixed sentence, and logged as one line naming the error's kind.

aiohttp would answer it in plain text quoting the offending bytes and log a traceback quoting them too:
an `Authorization` header with a stray byte would put its key in the log and back on the wire. No
request byte is ever repeated here. aiohttp offers no setting for this, so the runner gives each
connection a handler class of ours (`_QuietHandler`); everything else is aiohttp's.

`serve(app, host, port)` runs until SIGINT or SIGTERM and stops cleanly (exit status 0). `AccessLog`
is the access log it writes when asked (`CHANGJI_ACCESS_LOG=1`): method, path without its query,
status, size and time — never a header or a query string.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
from collections.abc import Sequence
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from api.errors import PROBLEM

log = logging.getLogger(__name__)
SENTENCES = {
    400: "the request could not be read: a malformed request line, header or body",
    414: "the request line is longer than this server accepts (8,190 bytes)",
    413: "the request is larger than this server accepts",
    431: "a request header is longer than this server accepts (8,190 bytes)",
}


class _QuietHandler(RequestHandler):
    def handle_error(
        self, request: BaseRequest, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        if status >= 500:  # a fault of ours (aiohttp's handler machinery): aiohttp logs and answers it
            return super().handle_error(request, status, exc, message)
        if isinstance(exc, LineTooLong):
            status = 414 if "status line" in str(exc).lower() else 431
        log.info("refused a request from %s that could not be read (%s)", request.remote, type(exc).__name__)
        titles = {413: "Content Too Large", 414: "URI Too Long", 431: "Request Header Fields Too Large"}
        title = titles.get(status, "Bad Request")
        body = {
            "type": f"https://changji.dev/problems/{title.lower().replace(' ', '-')}",
            "title": title,
            "status": status,
            "detail": SENTENCES.get(status, SENTENCES[400]),
            "errors": [],
        }
        response = web.Response(status=status, text=json.dumps(body), content_type=PROBLEM)
        response.force_close()
        return response


class AccessLog(AbstractAccessLogger):
    def log(self, request: BaseRequest, response: web.StreamResponse, time: float) -> None:
        path = request.raw_path.split("?", 1)[0]  # as sent, percent-escaped: one line, whatever it decodes to
        self.logger.info("%s %s %s %s %.1fms", request.method, path, response.status, response.body_length, time * 1000)


class _QuietServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _QuietHandler(self, loop=self._loop, **self._kwargs)


class Runner(web.AppRunner):
    """aiohttp's `AppRunner`, its connections handled by `_QuietHandler`. A connection answered with
    `Connection: close` and a body left unread (a 408, a 413) lingers `lingering_time` (1 s, not 10)."""

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        kwargs.setdefault("lingering_time", 1.0)
        super().__init__(app, **kwargs)

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _QuietServer  # the same server; only the handler class of its connections changes
        return server


def serve(
    app: web.Application, host: str, port: int, sockets: Sequence[socket.socket] = (), **runner_args: Any
) -> None:
    """Serve `app` on host:port — or on `sockets` already listening (a worker's, inherited from the
    process that bound them) — until SIGINT or SIGTERM."""

    async def main() -> None:
        runner = Runner(app, handle_signals=False, **runner_args)
        await runner.setup()
        if sockets:
            for sock in sockets:
                await web.SockSite(runner, sock).start()
        else:
            await web.TCPSite(runner, host, port).start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    asyncio.run(main())
