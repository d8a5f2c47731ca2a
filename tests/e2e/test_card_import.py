"""Cards from the wild over HTTP: every SillyTavern default card imports from PNG and JSON, exports back
field for field, its lorebook fires in a context, and a broken file is a 4xx with a reason — never a
500, never half stored."""

from __future__ import annotations

import base64
import io
import json
import struct
import zipfile
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from interchange.cards import read_card
from tests.builders import Api, MakeClient, api_for
from tests.shared_data import cards_dir

pytestmark = pytest.mark.both_stores

CARDS = ("default_Seraphina.png", "default_CodingSensei.png", "default_FluxTheCat.png", "default_Seraphina.card.json")


def card_file(name: str) -> bytes:
    return (cards_dir() / name).read_bytes()


async def card_count(api: Api) -> int:
    return len((await api.call("GET", "/v1/cards?limit=500"))["items"])


@pytest.mark.parametrize("name", CARDS)
async def test_every_default_card_imports_and_exports_field_for_field_in_every_format(api: Api, name: str) -> None:
    raw = card_file(name)
    card = await api.send("POST", "/v1/cards/import", raw)
    expected = read_card(raw).data
    assert card["card"] == expected
    png = name.endswith(".png")
    assert card["source"]["container"] == ("png" if png else "json") and card["source"]["spec"] == "v2"
    assert (card["art"] or {}).get("media_type") == ("image/png" if png else None) and card["language"] == "en"
    for format in ("v2", "v3", "png", "charx"):
        exported, headers = await api.fetch(f"/v1/cards/{card['id']}/export?format={format}")
        again = await api.send("POST", "/v1/cards/import", exported)
        added = {"v2": {}, "v3": {"group_only_greetings": []}, "png": {"group_only_greetings": []}}.get(format)
        if added is None:  # CHARX: its art as the main icon, declared
            added = {"group_only_greetings": [], **({"assets": [ICON]} if png else {})}
            assert again["source"]["container"] == "charx"
            assert (again["art"] or {}).get("sha256") == (card["art"] or {}).get("sha256")
        assert again["card"] == expected | added, format
        assert headers["Content-Type"].startswith(TYPES[format])


ICON = {"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main", "ext": "png"}
TYPES = {"v2": "application/json", "v3": "application/json", "png": "image/png", "charx": "application/zip"}


async def test_a_charx_goes_out_as_it_came_in(api: Api) -> None:
    assets = [ICON, {"type": "other", "uri": "embeded://assets/other/audio/hi.wav", "name": "hi", "ext": "wav"}]
    with Image.new("RGB", (3, 5), (200, 10, 10)) as image, io.BytesIO() as out:
        image.save(out, format="PNG")
        icon = out.getvalue()
    files = {
        "card.json": json.dumps({"spec": "chara_card_v3", "spec_version": "3.0", "data": {
            "name": "Felix Vance", "first_mes": "The archive door creaks.", "assets": assets}}).encode(),
        "assets/icon/images/main.png": icon,
        "assets/other/audio/hi.wav": b"RIFF\x00\x00\x00\x00WAVE",
        "module.risum": bytes(range(256)),
    }  # fmt: skip
    card = await api.send("POST", "/v1/cards/import", _zip(files))
    exported, headers = await api.fetch(f"/v1/cards/{card['id']}/export?format=charx")
    assert headers["Content-Disposition"].endswith("Felix%20Vance.charx")
    with zipfile.ZipFile(io.BytesIO(exported)) as archive:
        assert {name: archive.read(name) for name in archive.namelist() if name != "card.json"} == {
            k: v for k, v in files.items() if k != "card.json"
        }
    again = await api.send("POST", "/v1/cards/import", exported)
    assert again["card"] == card["card"] and again["art"] == card["art"]
    assert sorted((a["path"], a["sha256"]) for a in again["assets"]) == sorted(
        (a["path"], a["sha256"]) for a in card["assets"]
    )
    twice, _ = await api.fetch(f"/v1/cards/{again['id']}/export?format=charx")
    assert twice == exported  # (the same card, the same bytes)


async def test_an_exported_png_keeps_the_cards_own_art(api: Api) -> None:
    raw = card_file("default_Seraphina.png")
    card = await api.send("POST", "/v1/cards/import", raw)
    exported, _ = await api.fetch(f"/v1/cards/{card['id']}/export?format=png")
    with Image.open(io.BytesIO(raw)) as original, Image.open(io.BytesIO(exported)) as back:
        assert back.size == original.size
        assert back.convert("RGBA").tobytes() == original.convert("RGBA").tobytes()


async def test_the_json_card_imports_to_the_same_fields_as_its_png(api: Api) -> None:
    from_png = await api.send("POST", "/v1/cards/import", card_file("default_Seraphina.png"))
    from_json = await api.send("POST", "/v1/cards/import", card_file("default_Seraphina.card.json"))
    assert from_json["card"] == from_png["card"]
    assert from_json["source"]["container"] == "json" and from_json["art"] is None


async def test_a_multipart_upload_imports_the_file_it_carries(api: Api) -> None:
    boundary = "----changji-test"
    raw = card_file("default_FluxTheCat.png")
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="flux.png"\r\n'
            "Content-Type: image/png\r\n\r\n"
        ).encode()
        + raw
        + f"\r\n--{boundary}--\r\n".encode()
    )
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    card = await api.send("POST", "/v1/cards/import", body, headers=headers)
    assert card["name"] == "Flux the Cat" and card["source"]["filename"] == "flux.png"


async def test_seraphinas_lorebook_fires_on_its_keys_and_the_explain_list_names_the_key(api: Api) -> None:
    card = await api.send("POST", "/v1/cards/import", card_file("default_Seraphina.png"))
    books = await api.call("GET", f"/v1/cards/{card['id']}/lorebooks")
    assert books["items"] == [{"id": "embedded", "name": "Eldoria", "kind": "embedded", "entries": 4}]
    story = await api.call("POST", "/v1/stories", {"card_id": card["id"]}, 201)
    await api.append(story["id"], "user", "Will the glade keep us safe tonight?")
    context = await api.call("GET", f"/v1/stories/{story['id']}/context")
    lore = next(block for block in context["explain"] if block["what"] == "lore")
    fired = {ref["title"]: ref["key"] for ref in lore["lore"]}
    assert fired["glade"] == "glade"
    last = context["messages"][-1]["content"]
    assert "[Lore]" in last and "sanctuary" in last.lower()  # bring-your-own: the entry in full
    assert last.index("[Lore]") < last.index("Will the glade keep us safe tonight?")


async def test_a_card_of_another_tenant_cannot_be_exported(api: Api, other: Api) -> None:
    card = await api.send("POST", "/v1/cards/import", card_file("default_FluxTheCat.png"))
    await other.fetch(f"/v1/cards/{card['id']}/export?format=png", 404)


async def test_an_unknown_export_format_is_refused_at_its_field(api: Api) -> None:
    card = await api.send("POST", "/v1/cards/import", card_file("default_FluxTheCat.png"))
    async with api.client.get(f"/v1/cards/{card['id']}/export?format=gif", headers=api.headers) as response:
        problem = await response.json(content_type=None)
    assert response.status == 422 and problem["errors"][0]["field"] == "query.format"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png_with(text_chunks: list[tuple[bytes, bytes]], width: int = 2, height: int = 2) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"".join(b"\x00" + b"\x80\x80\x80" * width for _ in range(min(height, 4))))
    chunks = [_chunk(b"IHDR", header), *(_chunk(b"tEXt", k + b"\x00" + v) for k, v in text_chunks)]
    return b"\x89PNG\r\n\x1a\n" + b"".join(chunks) + _chunk(b"IDAT", pixels) + _chunk(b"IEND", b"")


def _b64(card: dict[str, Any]) -> bytes:
    return base64.b64encode(json.dumps(card).encode())


def _charx_bomb() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("card.json", json.dumps({"spec": "chara_card_v3", "data": {"name": "x"}}))
        archive.writestr("assets/other/x/zeros.bin", b"\x00" * (300 << 20))
    return out.getvalue()


def _bad_files() -> dict[str, bytes]:
    seraphina = card_file("default_Seraphina.png")
    good = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Ok", "first_mes": "hi"}}
    return {
        "truncated png": seraphina[: len(seraphina) // 3],
        "png cut inside its header": seraphina[:20],
        "png without a card": _png_with([]),
        "bad base64": _png_with([(b"chara", b"!!!not base64!!!")]),
        "base64 of not json": _png_with([(b"chara", base64.b64encode(b"\xff\xfe nope"))]),
        "huge dimensions": _png_with([(b"chara", _b64(good))], width=100_000, height=100_000),
        "name of the wrong type": json.dumps({"spec": "chara_card_v2", "data": {"name": 7}}).encode(),
        "greetings of the wrong type": json.dumps(
            {"spec": "chara_card_v2", "data": {"name": "x", "alternate_greetings": "hi"}}
        ).encode(),
        "data not an object": json.dumps({"spec": "chara_card_v2", "data": []}).encode(),
        "a world info file": card_file("Eldoria.json"),
        "deeply nested json": b'{"name": "x", "extensions": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        "not a card at all": b"GIF89a" + b"\x00" * 100,
        "charx zip bomb": _charx_bomb(),
        "charx path traversal": _zip({"card.json": b'{"name": "x"}', "../escape.png": b"x"}),
        "charx without card.json": _zip({"assets/icon/x.png": b"x"}),
    }


def _zip(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


async def test_broken_files_are_refused_with_a_reason_and_nothing_is_stored(make_client: MakeClient) -> None:
    api = api_for(await make_client(import_max_bytes=64 << 20), "tenant-a")
    before = await card_count(api)
    for what, raw in _bad_files().items():
        async with api.client.post("/v1/cards/import", data=raw, headers=api.headers) as response:
            problem = await response.json(content_type=None)
        assert 400 <= response.status < 500, (what, response.status, problem)
        assert problem["detail"] and problem["errors"][0]["field"], what
    assert await card_count(api) == before


async def test_a_file_over_the_import_limit_is_413_and_a_json_route_keeps_its_own_limit(
    make_client: MakeClient, tmp_path: Path
) -> None:
    api = api_for(await make_client(import_max_bytes=256 << 10, max_body_bytes=64 << 10), "tenant-a")
    async with api.client.post("/v1/cards/import", data=card_file("default_Seraphina.png"), headers=api.headers) as r:
        assert r.status == 413
    small = json.dumps({"spec": "chara_card_v2", "data": {"name": "Small", "description": "d" * (100 << 10)}})
    await api.send("POST", "/v1/cards/import", small.encode())  # over the JSON limit, under the import limit
    async with api.client.post(
        "/v1/cards", json={"card": {"name": "Big", "description": "d" * (100 << 10)}}, headers=api.headers
    ) as r:
        assert r.status == 413

    async def chunked() -> AsyncIterator[bytes]:  # no declared length: read only as far as the JSON limit
        yield b'{"card": {"name": "Big", "description": "'
        for _ in range(200):
            yield b"d" * 1024
        yield b'"}}'

    headers = {**api.headers, "Content-Type": "application/json"}
    async with api.client.post("/v1/cards", data=chunked(), headers=headers) as r:
        assert r.status == 413


async def test_a_multipart_form_gives_its_file_part_and_a_form_of_many_parts_is_refused(api: Api) -> None:
    boundary = "----changji-test"
    field = f'--{boundary}\r\nContent-Disposition: form-data; name="note"\r\n\r\nhello\r\n'.encode()
    file = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="flux.png"\r\n'
            "Content-Type: image/png\r\n\r\n"
        ).encode()
        + card_file("default_FluxTheCat.png")
        + b"\r\n"
    )
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    card = await api.send("POST", "/v1/cards/import", field + file + f"--{boundary}--\r\n".encode(), headers=headers)
    assert card["name"] == "Flux the Cat"
    before = await card_count(api)
    for body in (field * 40 + file + f"--{boundary}--\r\n".encode(), field * 2 + f"--{boundary}--\r\n".encode()):
        async with api.client.post("/v1/cards/import", data=body, headers={**api.headers, **headers}) as response:
            problem = await response.json(content_type=None)
        assert response.status == 422 and problem["errors"][0]["field"] == "body", problem
    assert await card_count(api) == before


async def test_a_card_whose_lorebook_cannot_be_read_is_refused_at_the_books_field(api: Api) -> None:
    too_many_keys = {"entries": [{"keys": [f"k{i}" for i in range(201)], "content": "x"}]}
    raw = json.dumps({"spec": "chara_card_v2", "data": {"name": "Booked", "character_book": too_many_keys}})
    async with api.client.post("/v1/cards/import", data=raw.encode(), headers=api.headers) as response:
        problem = await response.json(content_type=None)
    assert response.status == 422 and problem["errors"][0]["field"].startswith("body.data.character_book.entries.0")
    async with api.client.post(
        "/v1/cards", json={"card": {"name": "A", "character_book": "oops"}}, headers=api.headers
    ) as response:
        problem = await response.json(content_type=None)
    assert response.status == 422 and problem["errors"][0]["field"] == "body.card.character_book", problem
    card = await api.card()
    async with api.client.patch(
        f"/v1/cards/{card['id']}", json={"card": {"character_book": {"entries": 3}}}, headers=api.headers
    ) as response:
        problem = await response.json(content_type=None)
    assert response.status == 422 and problem["errors"][0]["field"] == "body.card.character_book.entries", problem
