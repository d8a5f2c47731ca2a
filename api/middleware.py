"""Bearer-key authentication and idempotent creating POSTs."""

from __future__ import annotations

import asyncio
import os
import re
import weakref
from collections.abc import Awaitable, Callable

from aiohttp import web

from api.errors import field_error, problem
from api.http import IDEMPOTENCY_KEY_PATTERN, body_limit, fingerprint, read_body
from api.keys import SERVICE, TENANT

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PUBLIC = ("/healthz", "/openapi.json")
IDEMPOTENCY_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)


@web.middleware
async def body_limit_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A body declared larger than the service takes is refused at once (413), key or no key, unread; one
    sent without a length is read only as far as the route's limit (the application's is the import limit)."""
    limit = body_limit(request)
    if request.content_length is not None and request.content_length > limit:
        response = problem(413, "Content Too Large", f"the body may be at most {limit} bytes")
        response.force_close()  # the declared body is never read
        return response
    return await handler(request.clone(client_max_size=limit) if limit != request.client_max_size else request)


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    preflight = request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers
    if preflight or request.path in PUBLIC or not request.path.startswith("/v1/"):  # (a preflight has no key)
        return await handler(request)
    header = request.headers.get("Authorization", "")
    scheme, _, key = header.partition(" ")
    tenant = None
    key = key.strip()
    if scheme.lower() == "bearer" and key and key.isascii() and key.isprintable():  # (keys are printable ASCII)
        tenant = await request.app[SERVICE].auth.authenticate(key)
    if tenant is None:
        response = problem(401, "Unauthorized", "a valid API key is required: Authorization: Bearer <key>")
        response.headers["WWW-Authenticate"] = 'Bearer realm="changji"'
        return response
    request[TENANT] = tenant
    return await handler(request)


_locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = weakref.WeakValueDictionary()


@web.middleware
async def idempotency_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """POSTs with an `Idempotency-Key` are answered once; a retry gets the stored response.

    Reusing a key with a different request body is refused (422). Only 2xx answers are stored,
    so a failed attempt can be retried with the same key. The answer is stored after the events
    commit; should the process die in between, the retry finds what the first attempt made — a keyed
    request names what it creates after its key (`api.http.new_id`) — and answers with it.
    """
    key = request.headers.get("Idempotency-Key")
    if request.method != "POST" or key is None or TENANT not in request:
        return await handler(request)
    if not IDEMPOTENCY_KEY.fullmatch(key):
        return problem(
            400, "Bad Request", "Idempotency-Key must be 1–255 printable ASCII characters",
            [field_error("header.Idempotency-Key", "1–255 printable ASCII characters", "value_error")],
        )  # fmt: skip
    svc = request.app[SERVICE]
    tenant = request[TENANT]
    lock = _locks.setdefault((tenant, key), asyncio.Lock())
    async with lock:
        raw = request.headers.get("If-Match", "").encode() + b"\n" + await read_body(request)
        request_hash = fingerprint(request.method, request.path_qs, raw)
        stored = await svc.executor.query(svc.keys.recall, tenant, key)
        if stored is not None and stored.request_hash != request_hash:
            return problem(422, "Unprocessable Content", "this Idempotency-Key was used for a different request")
        if stored is not None and stored.status:
            response = web.Response(status=stored.status, body=stored.body, content_type="application/json")
            response.headers["Idempotent-Replayed"] = "true"
            if stored.etag:
                response.headers["ETag"] = stored.etag
            return response
        if stored is None:  # (status 0: an attempt ran and its answer was lost; this one finds what it made)
            await svc.executor.query(svc.keys.reserve, tenant, key, request_hash)
        try:
            answer = await handler(request)
        except BaseException:
            await asyncio.shield(svc.executor.query(svc.keys.release, tenant, key))
            raise
        if key == svc.settings.fault_exit_after_key:  # tests: die between the commit and the answer
            os._exit(86)
        if isinstance(answer, web.Response) and 200 <= answer.status < 300 and isinstance(answer.body, bytes):
            etag = answer.headers.get("ETag")
            await svc.executor.query(svc.keys.remember, tenant, key, request_hash, answer.status, answer.body, etag)
        else:
            await svc.executor.query(svc.keys.release, tenant, key)
        return answer
