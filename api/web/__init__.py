"""The web page: static files shipped in the package, served by changji itself at `/` and `/ui/…`.

Nothing is built at install time and nothing is fetched from elsewhere: the page is plain ES modules
over Preact and htm (vendored in `static/vendor/` with their licences), and it calls the same `/v1`
API as any client, with the API key the user gives it kept in the tab's session storage.

Every answer carries a content security policy that lets the page load its own files only; the one
inline script, the import map that names Preact for its hooks, is allowed by its hash.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from aiohttp import web

STATIC = Path(__file__).parent / "static"
TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}


def _files() -> dict[str, Path]:
    """Every file the page may load, by its name under `/ui/` (read once: a name not listed is a 404,
    whatever `..` or symlink it holds)."""
    return {
        path.relative_to(STATIC).as_posix(): path
        for path in STATIC.rglob("*")
        if path.is_file() and path.suffix in TYPES
    }


def _policy(index: str) -> str:
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'"
        for body in re.findall(r"<script type=\"importmap\">(.*?)</script>", index, re.S)
    )
    return (
        f"default-src 'none'; script-src 'self' {hashes}; style-src 'self'; img-src 'self' data: blob:; "
        "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


def add_web_routes(app: web.Application) -> None:
    files = _files()
    index = (STATIC / "index.html").read_text(encoding="utf-8")
    headers = {
        "Content-Security-Policy": _policy(index),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",  # revalidated by ETag: a new version of the page is seen at once
    }

    async def page(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html", headers={**headers, "Content-Type": TYPES[".html"]})

    async def asset(request: web.Request) -> web.StreamResponse:
        path = files.get(request.match_info["name"])
        if path is None:
            raise web.HTTPNotFound(text="no such file in the page")
        return web.FileResponse(path, headers={**headers, "Content-Type": TYPES[path.suffix]})

    app.router.add_get("/", page)
    app.router.add_get("/ui/{name:.+}", asset)
