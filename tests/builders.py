"""Builders shared by every test layer: apps, cards, stories, save trees and an HTTP client helper."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from aiohttp.test_utils import TestClient

from api.keys import SERVICE
from domain.application import Changji
from domain.ports import TreeIndex
from domain.tree.rules.paths import walk_up
from domain.tree.rules.worldlines import SavePlan, plan_save
from domain.values import CardData, NodeView, SavePoint, StorySettings
from projections.context.assemble import assemble_context
from projections.context.records import Context
from projections.context.window import RenderCache, WindowCache
from providers.tokens import EstimatingCounter

TENANT = "tenant-a"
OTHER_TENANT = "tenant-b"
MEMORY_ENV = {"PERSISTENCE_MODULE": "eventsourcing.popo"}


def sqlite_env(path: Path) -> dict[str, str]:
    return {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)}


def memory_app() -> Changji:
    return Changji(env=MEMORY_ENV)


def sqlite_app(path: Path) -> Changji:
    return Changji(env=sqlite_env(path))


def a_card(**fields: Any) -> CardData:
    defaults: dict[str, Any] = {
        "name": "沈砚",
        "description": "{{char}}是北屿灯塔的守塔人。",
        "first_mes": "门被风撞开。“{{user}}，渡船三天后才到。”",
        "alternate_greetings": ["清晨的雾还没散。"],
    }
    return CardData(**{**defaults, **fields})


def new_renders() -> RenderCache:
    return RenderCache(EstimatingCounter())


class CountingLoad:
    """Wraps a node loader and counts how many nodes it was asked for."""

    def __init__(self, load: Callable[[UUID], NodeView]) -> None:
        self.load = load
        self.calls = 0

    def __call__(self, node_id: UUID) -> NodeView:
        self.calls += 1
        return self.load(node_id)


class PathIndex:
    """A TreeIndex answered from the aggregates themselves (a fake of the `nodes` read model)."""

    def __init__(self, app: Changji) -> None:
        self.app = app

    def is_ancestor(self, ancestor_id: UUID, node_id: UUID) -> bool:
        return any(n.id == ancestor_id for n in walk_up(self.app.node, node_id))

    def path_ids(self, node_id: UUID, min_depth: int) -> set[UUID]:
        return {n.id for n in walk_up(self.app.node, node_id) if n.depth >= min_depth}


@dataclass
class StoryBuilder:
    """A story on a Changji app, driven through the application's commands."""

    app: Changji
    card_id: UUID
    story_id: UUID
    root_id: UUID
    tenant: str = TENANT

    @classmethod
    def start(cls, app: Changji, card: CardData | None = None, tenant: str = TENANT, **overrides: Any) -> StoryBuilder:
        card_id, story_id, root_id = uuid4(), uuid4(), uuid4()
        app.cards.create_card(card_id, tenant, card or a_card(), StorySettings())
        app.stories.start_story(story_id, root_id, tenant, card_id, 0, "", overrides)
        return cls(app, card_id, story_id, root_id, tenant)

    def user(self, text: str = "你好。", parent: UUID | None = None) -> UUID:
        return self.append("user", text, parent).id

    def reply(self, text: str = "嗯。", parent: UUID | None = None) -> UUID:
        return self.append("reply", text, parent).id

    def append(self, kind: str, text: str, parent: UUID | None = None) -> NodeView:
        return self.app.stories.append_node(self.tenant, self.story_id, uuid4(), kind, text, parent).node  # type: ignore[arg-type]

    def turn(self, user: str = "你好。", reply: str = "嗯。", parent: UUID | None = None) -> tuple[UUID, UUID]:
        user_id = self.user(user, parent)
        return user_id, self.reply(reply)

    def turns(
        self, count: int, user: str = "第{i}句：今天天气很好。", reply: str = "第{i}答：是啊。"
    ) -> list[tuple[UUID, UUID]]:
        return [self.turn(user.format(i=i), reply.format(i=i)) for i in range(1, count + 1)]

    def checkout(self, node_id: UUID) -> None:
        self.app.stories.move_leaf(self.tenant, self.story_id, node_id)

    def annotate(self, node_id: UUID, action: str, *args: str) -> NodeView:
        """star / unstar / hide / unhide / revise(text, reason) by name, through the node commands."""
        nodes = self.app.nodes
        commands = {
            "star": nodes.star_node, "unstar": nodes.unstar_node, "hide": nodes.hide_node,
            "unhide": nodes.unhide_node, "revise": nodes.revise_reply,
        }  # fmt: skip
        return commands[action](self.tenant, node_id, *args).value

    def save(self, name: str, node_id: UUID | None = None, tree: TreeIndex | None = None) -> SavePoint:
        """A save point; ancestry comes from `tree` (the read models) or, by default, from the aggregates."""
        save_id = uuid4().hex[:16]
        return self.app.saves.mark_save(
            self.tenant, self.story_id, save_id, name, node_id, tree or PathIndex(self.app)
        ).value

    @property
    def leaf(self) -> UUID:
        leaf = self.app.story(self.tenant, self.story_id).leaf_id
        assert leaf is not None
        return leaf

    def context(
        self,
        at: UUID | None = None,
        load: Callable[[UUID], NodeView] | None = None,
        renders: RenderCache | None = None,
        summarized: bool = True,
        windows: WindowCache | None = None,
    ) -> Context:
        """The context at a node (default: the leaf); with `windows`, as the service builds it, from
        windows and spans cached across calls."""
        story = self.app.story(self.tenant, self.story_id)
        card = self.app.card_of(story).data
        upward = walk_up(load or self.app.node, at or self.leaf)
        renders = renders or new_renders()
        epoch = self.app.render_epoch(self.story_id)
        return assemble_context(
            card, self.app.settings(story), upward, renders, windows, epoch, load=self.app.node, summarized=summarized,
            recorded=self.app.summarized(self.story_id),
        )  # fmt: skip


# --- world lines (pure) -------------------------------------------------------------------------


@dataclass
class FakeTree:
    """A tree given as child → parent names, for the pure save-planning rule."""

    parents: dict[str, str | None]
    ids: dict[str, UUID] = field(init=False)

    def __post_init__(self) -> None:
        self.ids = {name: uuid4() for name in self.parents}
        self.names = {v: k for k, v in self.ids.items()}

    def ancestors(self, name: str) -> set[UUID]:
        out: set[UUID] = set()
        current: str | None = name
        while current is not None:
            out.add(self.ids[current])
            current = self.parents[current]
        return out

    def plan_and_save(self, saves: list[SavePoint], name: str, at: str) -> SavePoint:
        """Plan a save named `name` at node `at`, append it to `saves`, and return it."""
        path = self.ancestors(at)
        plan: SavePlan = plan_save(
            saves,
            on_path=lambda n: n in path,
            descends_from=lambda n, a: a in self.ancestors(self.names[n]),
            new_line_id=f"line-{len(saves)}",
        )
        save = SavePoint(
            id=f"save-{len(saves)}",
            name=name,
            node_id=self.ids[at],
            worldline_id=plan.worldline_id,
            worldline_name=plan.worldline_name,
            parent_save_id=plan.parent_save_id,
            fork_from_save_id=plan.fork_from_save_id,
            created_at=datetime(2025, 1, 1, tzinfo=UTC) + timedelta(minutes=len(saves)),
        )
        saves.append(save)
        return save

    def play(self, steps: Iterable[tuple[str, str]]) -> list[SavePoint]:
        saves: list[SavePoint] = []
        for name, at in steps:
            self.plan_and_save(saves, name, at)
        return saves


# --- HTTP ---------------------------------------------------------------------------------------

MakeClient = Callable[..., Awaitable[TestClient[Any, Any]]]


class Api:
    """One tenant's view of the HTTP API through an aiohttp TestClient (a real loopback server)."""

    def __init__(self, client: TestClient[Any, Any], key: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {key}"}

    async def call(
        self, method: str, path: str, json: Any = None, status: int = 200, headers: dict[str, str] | None = None
    ) -> Any:
        async with self.client.request(method, path, json=json, headers={**self.headers, **(headers or {})}) as r:
            data = await r.json(content_type=None) if r.status != 204 else None
            assert r.status == status, f"{method} {path} → {r.status}, expected {status}: {data}"
            return data

    async def send(
        self, method: str, path: str, data: bytes, status: int = 201, headers: dict[str, str] | None = None
    ) -> Any:
        """A request whose body is a file (raw bytes); the JSON answer."""
        async with self.client.request(method, path, data=data, headers={**self.headers, **(headers or {})}) as r:
            answer = await r.json(content_type=None) if r.status != 204 else None
            assert r.status == status, f"{method} {path} → {r.status}, expected {status}: {answer}"
            return answer

    async def fetch(self, path: str, status: int = 200) -> tuple[bytes, dict[str, str]]:
        """A GET whose answer is a file: its bytes and headers."""
        async with self.client.get(path, headers=self.headers) as r:
            data = await r.read()
            assert r.status == status, f"GET {path} → {r.status}, expected {status}: {data[:300]!r}"
            return data, dict(r.headers)

    async def card(self, **fields: Any) -> dict[str, Any]:
        body = {"card": {**a_card().model_dump(), **fields}}
        data: dict[str, Any] = await self.call("POST", "/v1/cards", body, 201)
        return data

    async def story(self, card_id: str | None = None, **settings: Any) -> dict[str, Any]:
        card_id = card_id or (await self.card())["id"]
        data: dict[str, Any] = await self.call("POST", "/v1/stories", {"card_id": card_id, "settings": settings}, 201)
        return data

    async def append(self, story_id: str, kind: str, text: str, parent_id: str | None = None) -> dict[str, Any]:
        body = {"kind": kind, "text": text, "parent_id": parent_id}
        data: dict[str, Any] = await self.call("POST", f"/v1/stories/{story_id}/nodes", body, 201)
        return data

    async def turn(self, story_id: str, user: str, reply: str) -> tuple[str, str]:
        u = await self.append(story_id, "user", user)
        r = await self.append(story_id, "reply", reply)
        return u["node"]["id"], r["node"]["id"]


def api_for(client: TestClient[Any, Any], tenant: str) -> Api:
    """An Api for `tenant`, with a fresh key made in the running service's key store."""
    _, key = client.app[SERVICE].keys.create_key(tenant)  # type: ignore[index]
    return Api(client, key)
