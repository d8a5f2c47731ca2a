"""`changji demo`: a sample story (or an external chat) played through the real HTTP API on loopback."""

from __future__ import annotations

import contextlib
import json
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import aiohttp
import click
from aiohttp import web

from api.app import create_app
from api.keys import SERVICE
from api.server import Runner
from api.settings import ModelSettings, Settings
from providers.fake_server import FakeModelServer, echo_writer
from storage import read_model_files


class Client:
    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session, self.base = session, base

    async def call(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        async with self.session.request(method, self.base + path, json=body) as response:
            data = await response.json(content_type=None) if response.status != 204 else None
            if response.status != status:
                raise click.ClickException(f"{method} {path} → {response.status}: {data}")
            return data

    async def turn(self, story_id: str, user: str, reply: str, parent_id: str | None = None) -> tuple[str, str]:
        u = await self.call(
            "POST", f"/v1/stories/{story_id}/nodes", {"kind": "user", "text": user, "parent_id": parent_id}, 201
        )
        r = await self.call("POST", f"/v1/stories/{story_id}/nodes", {"kind": "reply", "text": reply}, 201)
        return u["node"]["id"], r["node"]["id"]


async def run_demo(settings: Settings, source: Path | None, user_name: str | None, temporary: bool) -> None:
    """Serve on a free loopback port and drive the API like a client would (in a temp dir if asked)."""
    with tempfile.TemporaryDirectory(prefix="changji-demo-") as tmp:
        async with contextlib.AsyncExitStack() as stack:
            if temporary:
                settings = settings.model_copy(update={"data_dir": Path(tmp)})
            elif settings.persistence == "sqlite":  # a data dir of the user's: held as `serve` holds it
                stack.enter_context(read_model_files.serving(settings.data_dir))
            if not settings.main_model.configured:  # no provider set: an offline stand-in writes the engine turn
                fake = await stack.enter_async_context(FakeModelServer(echo_writer))
                settings = settings.model_copy(update={"main_model": ModelSettings(base_url=fake.url, model="offline")})
            await _serve_and_play(settings, source, user_name)


async def _serve_and_play(settings: Settings, source: Path | None, user_name: str | None) -> None:
    app = create_app(settings)
    runner = Runner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    _, key = app[SERVICE].keys.create_key("demo", "changji demo")
    headers = {"Authorization": f"Bearer {key}"}
    try:
        async with aiohttp.ClientSession(headers=headers) as session:
            client = Client(session, f"http://127.0.0.1:{port}")
            if source is None:
                story_id = await _sample(client)
                await _engine_turn(client, story_id)
            else:
                await _external(client, source, user_name)
    finally:
        await runner.cleanup()


async def _sample(client: Client) -> str:
    sample = json.loads(resources.files("api").joinpath("samples/lighthouse.json").read_text("utf-8"))
    card = await client.call("POST", "/v1/cards", {"card": sample["card"], "settings": {"user_name": "林舟"}}, 201)
    story = await client.call("POST", "/v1/stories", {"card_id": card["id"]}, 201)
    sid: str = story["id"]
    click.echo(f"card {card['name']} → story {sid}\n")
    nodes = []
    for user, reply in sample["turns"][:2]:
        nodes.append(await client.turn(sid, user, reply))
    first = await client.call("POST", f"/v1/stories/{sid}/saves", {"name": "风暴夜"}, 201)
    click.echo(f"💾 saved '{first['name']}' on world line {first['worldline_name']}")
    for user, reply in sample["turns"][2:4]:
        nodes.append(await client.turn(sid, user, reply))
    user_4, reply_4 = nodes[3]
    await client.call("POST", f"/v1/nodes/{nodes[2][1]}/star")
    click.echo("★ starred turn 3 (an anchor)")
    regen = await client.call("POST", f"/v1/stories/{sid}/nodes", {"kind": "reply", "parent_id": user_4,
        "text": "他没有回答，只是把汤碗往你面前推了推。窗外，一盏灯在雨里闪了三下。"}, 201)  # fmt: skip
    click.echo(f"↻ regenerated the reply to turn 4 (regenerated={regen['regenerated']})")
    await client.call("POST", f"/v1/stories/{sid}/checkout", {"node_id": reply_4})
    click.echo("⇄ went back to the first reply of turn 4")
    save = await client.call("POST", f"/v1/stories/{sid}/saves", {"name": "答应不碰二楼的门"}, 201)
    click.echo(f"💾 saved '{save['name']}' on world line {save['worldline_name']}")
    for user, reply in sample["turns"][4:]:
        await client.turn(sid, user, reply)
    await client.call("POST", f"/v1/stories/{sid}/checkout", {"node_id": nodes[1][1]})
    await client.turn(sid, "船票上写的名字是谁？", "沈砚把船票从你手里抽走，塞进了外套内袋。“今晚早点睡。”")
    click.echo("⑂ branched after turn 2 with a different question")
    fork = await client.call("POST", f"/v1/stories/{sid}/saves", {"name": "追问船票"}, 201)
    click.echo(f"💾 saved '{fork['name']}' on world line {fork['worldline_name']}")
    await client.call("POST", f"/v1/nodes/{nodes[0][0]}/hide")
    click.echo("🙈 hid the user's first line (kept in the tree, left out of the context)")
    patch = {
        "time": "台风夜",
        "location": "灯塔",
        "characters": {"沈砚": {"affinity": 10, "status": "警惕", "at": "灯塔"}},
    }
    scene = await client.call("PATCH", f"/v1/stories/{sid}/scene", {"patch": patch})
    click.echo(
        "🗺 scene set by hand (without a side model the scribe skips): " + scene["text"]["state"].replace("\n", " ⏎ ")
    )
    click.echo(f"   roster: {scene['text']['roster']}\n")
    await _print_tree(client, sid)
    await _print_context(client, sid)
    hits = await client.call("GET", f"/v1/stories/{sid}/search?q=船票")
    click.echo(f"\nsearch 船票 → {len(hits['hits'])} hits: " + " | ".join(h["snippet"][:24] for h in hits["hits"]))
    return sid


async def _engine_turn(client: Client, sid: str) -> None:
    """One turn in engine mode, streamed as server-sent events."""
    click.echo("\nengine mode: POST /v1/stories/{id}/turns (Accept: text/event-stream)")
    url = f"{client.base}/v1/stories/{sid}/turns"
    async with client.session.post(
        url, json={"text": "我们等风停了再说。"}, headers={"Accept": "text/event-stream"}
    ) as r:
        async for raw in r.content:
            line = raw.decode().strip()
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:") and kind != "done":
                click.echo(f"  {kind:<7} {line[5:].strip()[:100]}")
    costs = await client.call("GET", f"/v1/stories/{sid}/costs")
    click.echo(
        f"cost ledger: {costs['calls']} model calls, {costs['prompt_tokens']} prompt + {costs['completion_tokens']} completion tokens"
    )


async def _external(client: Client, source: Path, user_name: str | None) -> None:
    data = json.loads(source.read_text("utf-8"))
    name = user_name or next(iter(data))
    if name not in data:
        raise click.ClickException(f"no user {name!r} in {source}; try one of: {', '.join(list(data)[:5])} …")
    person = data[name]
    companion = {"name": "AI伴侣", "description": "{{user}}的陪伴型聊天伙伴，记得{{user}}说过的事。",
                 "first_mes": "你好，我是你的AI伴侣。"}  # fmt: skip
    card = await client.call("POST", "/v1/cards", {"card": companion, "settings": {"user_name": name}}, 201)
    story = await client.call("POST", "/v1/stories", {"card_id": card["id"], "title": f"{name} ({source.name})"}, 201)
    sid, turns = story["id"], 0
    for day, rounds in sorted(person["history"].items()):
        for i, item in enumerate(rounds):
            user = f"[{day}] {item['query']}" if i == 0 else item["query"]
            await client.turn(sid, user, item["response"])
            turns += 1
    click.echo(f"replayed {turns} turns of {name} from {source} into story {sid}\n")
    await _print_tree(client, sid, limit=12)
    await _print_context(client, sid)


async def _print_tree(client: Client, sid: str, limit: int = 200) -> None:
    tree = await client.call("GET", f"/v1/stories/{sid}/tree?limit=5000")
    path = await client.call("GET", f"/v1/stories/{sid}/path?limit=5000")
    on_path = {n["id"] for n in path["nodes"]}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for node in tree["nodes"]:
        children.setdefault(node["parent_id"], []).append(node)
    click.echo(f"tree ({len(tree['nodes'])} nodes; ● on the current path, ★ anchor, ~ hidden):")
    lines: list[str] = []

    def show(node: dict[str, Any], lead: str, rest: str) -> None:
        mark = "●" if node["id"] in on_path else "○"
        flags = ("★" if node["starred"] else "") + ("~" if node["hidden"] else "")
        lines.append(f"{lead}{mark} {node['kind']:<8}{flags:<2} {node['preview'][:36]}")
        kids = children.get(node["id"], [])
        for i, kid in enumerate(kids):
            if len(kids) == 1:
                show(kid, rest, rest)
            else:
                last = i == len(kids) - 1
                show(kid, rest + ("└─" if last else "├─"), rest + ("  " if last else "│ "))

    for root in children.get(None, []):
        show(root, "", "")
    for line in lines[:limit]:
        click.echo("  " + line)
    if len(lines) > limit:
        click.echo(f"  … {len(lines) - limit} more")


async def _print_context(client: Client, sid: str) -> None:
    ctx = await client.call("GET", f"/v1/stories/{sid}/context")
    click.echo(
        f"\ncontext for the next turn ({ctx['tokens']} of {ctx['budget']} tokens, counter {ctx['token_counter']}):"
    )
    for i, message in enumerate(ctx["messages"]):
        text = message["content"].replace("\n", " ⏎ ")
        click.echo(f"  [{i}] {message['role']:<9} {text[:90]}{'…' if len(text) > 90 else ''}")
    click.echo("explain:")
    for block in ctx["explain"]:
        click.echo(
            f"  - {block['what']:<12} {block['why']} · {len(block['node_ids'])} nodes · {block['chars']} chars · {block['tokens']} tokens"
        )
