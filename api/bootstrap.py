"""The composition root: every resource of the running service built from settings, each one
injectable (tests pass their own), and started and stopped in order.

`bootstrap(settings)` builds; `Service.lifecycle()` lists each resource's start and stop, which the
aiohttp app runs as one cleanup context per resource (and `Service.start`/`close` in one go, for
scripts). Nothing here decides anything about stories: it only wires.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from api.auth import Authenticator
from api.settings import RETIRED_ENV, Settings
from domain.application import Changji
from domain.ports import ChatModel, Embedder, TokenCounter
from domain.tree.events import StoryDeleted
from domain.values import NodeView
from engine.turns import TurnRunner
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from providers.embedders import E5Embedder, EndpointEmbedder, HashingEmbedder, e5_available
from providers.openai import OpenAIChat
from providers.relay import Relay
from providers.tokens import default_counter
from schedulers.memory_sweep import MemorySweep
from schedulers.system import JobPolicy, JobSystem, Worker
from schedulers.workers.compaction import CompactWorker
from schedulers.workers.scribe import ScribeWorker
from service.card_memory import CardMemoryKeeper
from service.executor import Executor
from service.imports import Importer
from service.leadership import Duty, Leadership
from service.log_follower import LogFollower
from service.memory import MemorySearch
from service.proxy import ChatProxy
from service.read_side import ReadSide
from service.recall import Recall
from service.search_rewrites import SearchRewrites
from service.views import StoryViews
from service.writes import StoryWrites
from storage import read_model_files
from storage.checkpoints import LOG_LIMIT_BYTES, Checkpointer
from storage.embedding_cache import EmbeddingCache
from storage.leadership import LeaderLock
from storage.notifications import SQLiteNotifications, StoredEvents
from storage.service_db import ServiceData, ServiceDB
from storage.stop_requests import StopRequests
from storage.write_lock import WriteLock

log = logging.getLogger(__name__)

Step = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Resource:
    """One part of the service with its own start and stop (either may do nothing)."""

    name: str
    start: Step
    stop: Step


async def _nothing() -> None:
    return None


@dataclass
class Service:
    """The assembled service: one field per resource."""

    settings: Settings
    app: Changji
    store: ReadModels
    runner: ProjectionRunner
    read_side: ReadSide
    executor: Executor
    views: StoryViews
    writes: StoryWrites
    recall: Recall
    keys: ServiceData
    auth: Authenticator
    counter: TokenCounter
    main_model: ChatModel | None
    side_model: ChatModel | None
    turns: TurnRunner | None
    compactor: CompactWorker
    jobs: JobSystem
    checkpointer: Checkpointer | None
    leadership: Leadership  # the one process of a data dir that runs the jobs and checkpoints
    follower: LogFollower  # what other processes write to the event store
    importer: Importer
    proxy: ChatProxy
    relay: Relay | None  # the chat-completions proxy's upstream: the main model's endpoint
    memory: CardMemoryKeeper  # each card's memory kept up with its stories
    searches: SearchRewrites  # the side model's search of a story's memory for the user's words
    connections: list[Closable] = field(default_factory=list)  # the store's other connections, closed last

    def lifecycle(self) -> list[Resource]:
        """The resources in the order they start; they stop in the reverse order."""

        async def close_app() -> None:
            self.app.close()

        async def close_keys() -> None:
            await asyncio.to_thread(self.keys.close)

        async def close_connections() -> None:
            for connection in self.connections:
                try:
                    await asyncio.to_thread(connection.close)
                except Exception:
                    log.exception("closing %s failed", type(connection).__name__)

        turns = self.turns
        # on a shared database each process checkpoints its own read models (not a leader's duty)
        checkpoints = self.checkpointer if self.settings.shared else None
        return [
            Resource("store connections", _nothing, close_connections),
            Resource("key store", _nothing, close_keys),
            Resource("event store", _nothing, close_app),
            Resource("the lead", self.leadership.claim, _nothing),  # (its duties start last)
            Resource("read side", self.read_side.start, self.read_side.stop),
            Resource("executor", _nothing, self.executor.stop),
            Resource("recall", _nothing, self.recall.stop),
            Resource("main model", _nothing, self.main_model.close if self.main_model else _nothing),
            Resource("side model", _nothing, self.side_model.close if self.side_model else _nothing),
            Resource("proxy upstream", _nothing, self.relay.close if self.relay else _nothing),
            Resource("turns", _nothing, turns.stop_all if turns else _nothing),
            Resource("leadership", self.leadership.start, self.leadership.stop),  # jobs and checkpoints
            *([Resource("checkpoints", checkpoints.start, checkpoints.stop)] if checkpoints is not None else []),
        ]

    async def start(self) -> None:
        for resource in self.lifecycle():
            await resource.start()

    async def close(self) -> None:
        for resource in reversed(self.lifecycle()):
            await resource.stop()


def bootstrap(
    settings: Settings,
    *,
    app: Changji | None = None,
    store: ReadModels | None = None,
    keys: ServiceData | None = None,
    counter: TokenCounter | None = None,
    main_model: ChatModel | None = None,
    side_model: ChatModel | None = None,
    background_checkpoints: bool = True,
) -> Service:
    """Build the service from settings; any resource given is used instead of the one settings describe.

    `background_checkpoints`: once started, checkpoint the SQLite logs on a thread of their own rather
    than inside whichever commit crosses the threshold (`storage/checkpoints.py`). One-shot CLI
    commands that never start the service pass False and keep SQLite's automatic checkpoints."""
    for name in settings.retired:
        log.warning("%s is no longer read: %s", name, RETIRED_ENV[name])
    env = settings.event_store_env()
    checkpointer = None
    local = settings.persistence != "memory"  # (files in the data dir: the store's, or this process's caches)
    if local:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        if background_checkpoints and app is None and store is None:
            env["SQLITE_WAL_AUTOCHECKPOINT"] = "0"
            logs = [settings.read_models_path] if settings.shared else [env["SQLITE_DBNAME"], settings.read_models_path]
            checkpointer = Checkpointer(logs)
    written = WriteLock(None)  # (one of this process alone: a store given, or one in memory)
    if app is None:
        app = _application(settings, env)
        if local:  # other processes write the same store: one commit at a time
            written = _write_lock(settings, env)
        app.write_lock = written
    connections: list[Closable] = [written]
    if app.bulk_events is None and (bulk := notifications(app, settings)) is not None:
        connections.append(bulk)
        app.bulk_events = bulk.events_of  # (on a connection of the domain's own: nodes read in bulk)
    rebuilt_in, held, moves = None, None, 0  # (where rebuilt read models are offered; the file in use, held)
    if store is None:
        path = settings.read_models_path
        if local:
            rebuilt_in, moves = settings.data_dir, written.files  # (counted before the file in use is read)
            held_path, held = read_model_files.hold_current(settings.data_dir)
            path = str(held_path)
        store = ReadModels(path, LOG_LIMIT_BYTES if checkpointer else None)
        if settings.database is not None:
            _same_database(store, settings.database, app)
    runner = ProjectionRunner(app, store, _kept(notifications(app, settings), connections))
    # a rebuilt file of this process's own read models is switched to under a lock of this process's own
    read_side = ReadSide(
        runner, settings.poll_interval, data_dir=rebuilt_in, write_lock=WriteLock(None) if settings.shared else written,
        held=held, moves=moves,
    )  # fmt: skip
    if checkpointer is not None:
        read_side.on_adopted(checkpointer.replace)
    # where every commit waits for the disk, a command on the loop would hold it that long
    # (and a shared database answers over the network)
    inline = settings.persistence == "memory" or (
        settings.persistence == "sqlite" and settings.sqlite_synchronous == "NORMAL"
    )
    follower = LogFollower(
        app, _kept(notifications(app, settings), connections), written
    )  # (others' writes: other workers)
    executor = Executor(
        read_side, inline_commands=inline, follower=follower, write_lock=written, fresh_reads=settings.shared
    )
    counter = counter or default_counter()
    keys = keys or service_data(settings)
    main_model = main_model or _model(settings, "main")
    side_model = side_model or _model(settings, "side")
    embedder = _embedder(settings)
    saved = (  # opened after everything that can fail: nothing below does (hashing: cheaper than a read)
        EmbeddingCache.open(str(settings.data_dir / "embeddings.sqlite"))
        if embedder is not None and not embedder.instant and local
        else None
    )
    recall = Recall(store, embedder, saved=saved, vector_wait=settings.recall_vector_wait)
    follower.on(StoryDeleted, lambda deleted: recall.forget(deleted.originator_id))  # (deleted by another worker)
    views = StoryViews(app, store, counter, recall, blobs=keys.blob)
    searches = SearchRewrites(app, executor, views, side_model, settings.recall_rewrite_seconds)
    turns = (
        TurnRunner(
            app, executor, read_side, views.engine_context, main_model, settings.max_rounds,
            open_on_loop=recall.embedder is None or recall.embedder.instant,
            memory=MemorySearch(executor, views, recall),
            lore=views.lore_at,
            prepare=recall.prepare if recall.embedder is not None and not recall.embedder.instant else None,
            stops=_kept(_stop_requests(settings), connections),
            warm=views.warm,
            rewrite=(
                (lambda tenant_id, user: searches.rewrite(tenant_id, user, _engine_recalls(views, tenant_id, user)))
                if side_model
                else None
            ),
        )
        if main_model
        else None
    )  # fmt: skip
    compactor = CompactWorker(
        app, executor, side_model, views.scene_of, max_attempts=settings.job_max_attempts,
        path_of=lambda node_id: executor.query(store.path_up, node_id),
    )  # fmt: skip
    workers: list[Worker] = [ScribeWorker(app, store, executor, side_model), compactor]
    policy = JobPolicy(
        sweep_seconds=settings.job_sweep_seconds,
        retry_seconds=settings.job_retry_seconds,
        max_attempts=settings.job_max_attempts,
        concurrency=settings.job_concurrency,
    )
    jobs = JobSystem(app, store, executor, read_side, workers, policy)
    keeper = CardMemoryKeeper(app, store, executor, side_model)
    sweep = MemorySweep(app, store, executor, read_side, keeper, settings.memory_sweep_seconds)
    duties = [Duty("job system", jobs.start, jobs.stop), Duty("card memory", sweep.start, sweep.stop)]
    if checkpointer is not None and not settings.shared:  # (the data dir's files, shared: the leader's duty)
        duties.insert(0, Duty("checkpoints", checkpointer.start, checkpointer.stop))
    leadership = Leadership(_leader_lock(settings), duties)
    # only the leader adopts a rebuilt read-model file of the data dir; on a shared database each process its own
    read_side.leading = (lambda: True) if settings.shared else (lambda: leadership.leading)
    return Service(
        settings, app, store, runner, read_side, executor, views, StoryWrites(app, views), recall, keys,
        Authenticator(keys, executor), counter,
        main_model, side_model, turns, compactor, jobs, checkpointer, leadership, follower,
        Importer(app, keys, settings.import_max_bytes), ChatProxy(app, views, store, keys.put_blob, settings.proxy_budget), _relay(main_model),
        keeper, searches, connections,
    )  # fmt: skip


class Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


def _kept(connection: C | None, connections: list[Closable]) -> C | None:
    """`connection`, noted to be closed with the service."""
    if connection is not None:
        connections.append(connection)
    return connection


def _application(settings: Settings, env: dict[str, str]) -> Changji:
    """The domain on its event store; on a shared database, made under its schema lock (eventsourcing
    creates its tables and functions as it starts, and two processes starting at once would race)."""
    if settings.database is None:
        return Changji(env=env)
    from storage.postgres.migrate import copying
    from storage.postgres.service_db import schema_lock

    with schema_lock(settings.database):
        if copying(settings.database):
            raise RuntimeError(
                "a `changji migrate` into this database began and did not finish: drop the database, make it"
                " anew and copy again"
            )
        return Changji(env=env)


def _same_database(store: ReadModels, url: str, app: Changji) -> None:
    """Read models this process folded from another database (a data dir pointed at a new one, or the
    database restored from a backup to an earlier point) are dropped: the runner folds them anew."""
    from storage.postgres.service_db import identity

    database, head = identity(url), int(app.recorder.max_notification_id() or 0)
    folded_from = store.folded_from()  # (None with events folded: a file from before the mark, or a rebuild's)
    if (folded_from != database and (folded_from is not None or store.position() > 0)) or store.position() > head:
        log.warning(
            "the read models in %s were folded from another database (or from a later point of this one):"
            " they are folded again from its log", store.path,
        )  # fmt: skip
        store.drop()
    store.mark_folded_from(database)


def service_data(settings: Settings) -> ServiceData:
    """API keys, idempotency records and blobs: in the shared database, or the data dir's file."""
    if settings.database is not None:
        from storage.postgres.service_db import PostgresServiceDB  # (psycopg: the postgresql extra)

        return PostgresServiceDB(settings.database)
    return ServiceDB(settings.service_db_path)


def _write_lock(settings: Settings, env: dict[str, str]) -> WriteLock:
    if settings.database is not None:
        from storage.postgres.locks import AdvisoryWriteLock

        return AdvisoryWriteLock(settings.database)
    return WriteLock(f"{env['SQLITE_DBNAME']}.lock")


def notifications(app: Changji, settings: Settings) -> StoredEvents | None:
    """The event store's log read in bulk (None: through the recorder and the mapper)."""
    if settings.database is not None:
        from storage.postgres.notifications import PostgresNotifications

        return PostgresNotifications.of(app, settings.database)
    return SQLiteNotifications.of(app)


def _stop_requests(settings: Settings) -> StopRequests | None:
    """Where a stop asked of a turn running in another process is left (None: no other process)."""
    if settings.database is not None:
        from storage.postgres.stop_requests import PostgresStopRequests

        return PostgresStopRequests(settings.database)
    return StopRequests(settings.data_dir / "stops") if settings.workers > 1 else None


def _leader_lock(settings: Settings) -> LeaderLock:
    if settings.database is not None:
        from storage.postgres.locks import AdvisoryLeaderLock

        return AdvisoryLeaderLock(settings.database)
    return LeaderLock(settings.data_dir if settings.persistence == "sqlite" else None)


def _embedder(settings: Settings) -> Embedder | None:
    """Recall's embedder: the endpoint the operator configured, else e5 when installed, else none.
    Measured on LoCoMo (`ops/bench/locomo_recall.py`), the two BM25 rankings fused with e5 find the most;
    the hashing embedder adds nothing to the two BM25 rankings, so without e5 recall is BM25 alone
    (`hashing` stays, to choose)."""
    chosen, endpoint = _embedder_chosen(settings), settings.embeddings
    if chosen == "endpoint":
        return EndpointEmbedder(
            endpoint.endpoint(), settings.embed_dimensions, settings.embed_query_prefix, settings.embed_passage_prefix
        )
    if chosen == "e5":
        return E5Embedder()
    return HashingEmbedder() if chosen == "hashing" else None


def _embedder_chosen(settings: Settings) -> str | None:
    choice = settings.embedder
    if choice == "endpoint" or (choice == "auto" and settings.embeddings.configured):
        return "endpoint"
    if choice == "e5" or (choice == "auto" and e5_available()):
        return "e5"
    return "hashing" if choice == "hashing" else None


def embedder_name(settings: Settings) -> str:
    """The name of recall's embedder, as `Recall.embedder_name` gives it, without making the embedder."""
    names = {"endpoint": settings.embeddings.model, "e5": E5Embedder.model, "hashing": HashingEmbedder.model}
    chosen = _embedder_chosen(settings)
    return names[chosen] if chosen is not None else "none (BM25 only)"


def _engine_recalls(views: StoryViews, tenant_id: str, user: NodeView) -> Callable[[], bool]:
    """Whether the context an engine turn gets at the user's words recalls."""
    return lambda: views.recalls(lambda: views.engine_context(tenant_id, user.story_id, user.id))


def _relay(main_model: ChatModel | None) -> Relay | None:
    """The proxy relays to the main model's endpoint (with its own connections)."""
    return Relay(main_model.endpoint) if isinstance(main_model, OpenAIChat) else None


def _model(settings: Settings, role: str) -> OpenAIChat | None:
    model = settings.main_model if role == "main" else settings.side_model
    return OpenAIChat(model.endpoint()) if model.configured else None
