"""The web page's files as the server gives them (a real app on loopback), and the page's own
consistency read from its sources: every module it imports is shipped, every word it shows through
`t()` exists in English and in Chinese."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from yarl import URL

from api.web import STATIC

KEY = re.compile(r"(?:^|[{,])\s*([a-z][a-z0-9_]*):\s*\"", re.M)  # a word's key: its value is a string literal
MODULES = sorted(p.name for p in STATIC.glob("*.js"))


async def test_the_page_is_served_at_the_root_with_a_policy_that_allows_only_its_own_files(
    client: TestClient[Any, Any],
) -> None:
    answer = await client.get("/")
    assert answer.status == 200
    assert answer.content_type == "text/html"
    body = await answer.text()
    assert '<script type="module" src="/ui/app.js">' in body
    policy = answer.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src 'self' 'sha256-" in policy
    assert "unsafe-inline" not in policy and "http" not in policy
    assert answer.headers["X-Content-Type-Options"] == "nosniff"


async def test_every_file_the_page_names_is_served_with_its_type(client: TestClient[Any, Any]) -> None:
    index = (STATIC / "index.html").read_text(encoding="utf-8")
    named = re.findall(r'(?:src|href)="(/ui/[^"]+)"', index) + re.findall(r'"(/ui/vendor/[^"]+)"', index)
    assert "/ui/app.js" in named and "/ui/vendor/preact.js" in named
    for path in named:
        answer = await client.get(path)
        assert answer.status == 200, path
        assert answer.content_type == ("text/css" if path.endswith(".css") else "text/javascript"), path


@pytest.mark.parametrize(
    "path", ["/ui/../__init__.py", "/ui/%2e%2e/__init__.py", "/ui/vendor/../../__init__.py", "/ui/nothing.js",
             "/ui/vendor/README.md", "/ui/vendor/LICENSE-htm"],
)  # fmt: skip
async def test_nothing_but_the_page_files_is_served(client: TestClient[Any, Any], path: str) -> None:
    sent = URL(str(client.make_url("/")).rstrip("/") + path, encoded=True)  # (absolute and encoded: sent as written)
    assert sent.raw_path == path
    answer = await client.session.get(sent)
    assert answer.status == 404
    assert "import" not in await answer.text()


async def test_the_page_needs_no_key_and_the_api_still_does(client: TestClient[Any, Any]) -> None:
    assert (await client.get("/ui/app.js")).status == 200
    assert (await client.get("/v1/stories")).status == 401


@pytest.mark.parametrize("module", MODULES)
def test_every_module_a_page_module_imports_is_shipped(module: str) -> None:
    source = (STATIC / module).read_text(encoding="utf-8")
    imported = re.findall(r'^import .*? from "([^"]+)";', source, re.M | re.S)
    assert imported or module == "i18n.js" or module == "api.js"
    for name in imported:
        if name in ("preact", "preact/hooks", "htm"):
            continue  # the import map's names (index.html)
        assert name.startswith("./"), f"{module} imports {name}: only the page's own files or the import map"
        assert (STATIC / name[2:]).is_file(), f"{module} imports {name}, which is not shipped"


def _registered(source: str) -> dict[str, set[str]]:
    """The keys each language registers in a module's `register({en: {...}, zh: {...}})` (its values are
    string literals, so a key is a name before `: "`)."""
    found: dict[str, set[str]] = {"en": set(), "zh": set()}
    for call in re.findall(r"^register\(\{(.*?)^\}\);", source, re.S | re.M):
        english, chinese = re.split(r"\bzh: \{", call, maxsplit=1)
        found["en"] |= set(re.findall(KEY, english))
        found["zh"] |= set(re.findall(KEY, chinese))
    return found


def test_every_word_the_page_shows_exists_in_english_and_in_chinese() -> None:
    registered: dict[str, set[str]] = {"en": set(), "zh": set()}
    used: dict[str, set[str]] = {}
    for path in STATIC.glob("*.js"):
        source = path.read_text(encoding="utf-8")
        for language, keys in _registered(source).items():
            registered[language] |= keys
        for key in re.findall(r"\bt\(\"([a-z][a-z0-9_]*)\"", source):
            used.setdefault(key, set()).add(path.name)
    assert registered["en"], "no module registers its words"
    missing = {language: sorted(key for key in used if key not in registered[language]) for language in ("en", "zh")}
    assert missing == {"en": [], "zh": []}, missing
    assert registered["en"] == registered["zh"], (
        sorted(registered["en"] ^ registered["zh"]),
        "a word registered in one language only",
    )


def test_the_vendored_libraries_carry_their_licences() -> None:
    vendor = STATIC / "vendor"
    for name in ("preact.js", "hooks.js", "htm.js", "LICENSE-preact", "LICENSE-htm", "README.md"):
        assert (vendor / name).is_file(), name
    assert "MIT License" in (vendor / "LICENSE-preact").read_text()
    assert "Apache License" in (vendor / "LICENSE-htm").read_text()


@pytest.mark.slow
def test_the_page_is_shipped_in_the_package(tmp_path: Path) -> None:
    """A wheel built from the checkout holds every file of the page (a non-editable install serves it)."""
    root, source = Path(__file__).resolve().parents[2], tmp_path / "source"
    source.mkdir()  # (a copy: a build/ left in the checkout by an earlier build would hide a broken glob)
    shutil.copy(root / "pyproject.toml", source)
    shutil.copy(root / "README.md", source)
    for package in (
        "domain",
        "projections",
        "providers",
        "storage",
        "service",
        "engine",
        "schedulers",
        "api",
        "interchange",
    ):
        shutil.copytree(root / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "-q", "-w", str(tmp_path), str(source)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = tmp_path.glob("changji-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    wanted = {f"api/web/static/{p.relative_to(STATIC).as_posix()}" for p in STATIC.rglob("*") if p.is_file()}
    assert wanted and wanted <= shipped, sorted(wanted - shipped)
