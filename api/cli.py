"""The `changji` command: serve, demo, import, replay, projections rebuild, keys."""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import click
from pydantic import ValidationError

from api.app import create_app
from api.bootstrap import Service, bootstrap, embedder_name, notifications, service_data
from api.keys import SERVICE, WORKER
from api.server import AccessLog
from api.server import serve as serve_app
from api.settings import Settings
from api.supervisor import Supervisor, end_with_parent, listening_sockets, worker_argv
from domain.application import Changji
from domain.errors import DomainError
from interchange.card_data import CardFormatError
from interchange.chat_plan import ChatFormatError
from interchange.lorebook_fields import LorebookFormatError
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from service.read_side import replay_if_empty
from storage import read_model_files
from storage.postgres import redacted

DATA_DIR = click.option(
    "--data-dir", type=click.Path(path_type=Path), default=None, help="data directory [env CHANGJI_DATA_DIR; .changji]"
)
LOCAL_TENANT = "local"


@click.group()
@click.version_option(package_name="changji", prog_name="changji")
@click.option("--log-level", default="INFO", show_default=True, help="the log's level (DEBUG, INFO, WARNING…)")
def main(log_level: str) -> None:
    """场记 changji — a continuity engine for AI role-play."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 <pid>`: every thread's stack, to stderr
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@main.command()
@DATA_DIR
@click.option("--host", default=None, help="bind address [env CHANGJI_HOST; 127.0.0.1]")
@click.option("--port", type=int, default=None, help="port [env CHANGJI_PORT; 8780]")
@click.option("--workers", type=int, default=None, help="serving processes, one core each [env CHANGJI_WORKERS; 1]")
@click.option("--listen-fds", default=None, hidden=True)  # a worker: the listening sockets it inherited
@click.option("--worker-index", type=int, default=0, hidden=True)
@click.option("--parent-pid", type=int, default=None, hidden=True)  # a worker ends with this process
@click.pass_context
def serve(
    ctx: click.Context,
    data_dir: Path | None,
    host: str | None,
    port: int | None,
    workers: int | None,
    listen_fds: str | None,
    worker_index: int,
    parent_pid: int | None,
) -> None:
    """Run the HTTP API: on the embedded SQLite store, or the PostgreSQL database of CHANGJI_DATABASE_URL."""
    try:
        settings = Settings.from_env(data_dir=data_dir, host=host, port=port, workers=workers)
    except ValidationError as exc:
        raise click.ClickException(_reason(exc)) from None
    if listen_fds is not None:
        _serve_worker(settings, [int(fd) for fd in listen_fds.split(",")], worker_index, parent_pid or os.getppid())
        return
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    db = service_data(settings)
    if (key := db.first_key(LOCAL_TENANT, "created by the first `changji serve`")) is not None:
        click.echo(f"First start: an API key for tenant '{LOCAL_TENANT}' (shown once, stored hashed):\n\n  {key}\n")
    db.close()
    with contextlib.ExitStack() as stack:  # the data dir held until the server stops: a rebuild offers it its file
        try:
            stack.enter_context(read_model_files.serving(settings.data_dir))
        except read_model_files.AlreadyServed as exc:
            raise click.ClickException(str(exc)) from None
        if settings.workers > 1:
            _supervise(settings, ctx.find_root().params["log_level"])
            click.echo("changji stopped")
            return
        app = create_app(settings)
        _banner(settings, app[SERVICE].recall.embedder_name)
        serve_app(app, settings.host, settings.port, access_log_class=AccessLog, access_log=_access(settings))
    click.echo("changji stopped")


def _banner(settings: Settings, recall: str) -> None:
    workers = f", {settings.workers} workers" if settings.workers > 1 else ""
    click.echo(
        f"changji listening on http://{settings.host}:{settings.port} (data in {settings.data_dir.resolve()}{workers})"
        if settings.database is None
        else f"changji listening on http://{settings.host}:{settings.port} (store: PostgreSQL at"
        f" {redacted(settings.database)}; this process's caches in {settings.data_dir.resolve()})"
    )
    for role, model in (("main model", settings.main_model), ("side model", settings.side_model)):
        where = f"{model.model} at {model.base_url}" if model.configured else "none"
        click.echo(f"  {role}: {where}")
    if not settings.main_model.configured:
        click.echo("    (engine endpoints answer 503; bring-your-own mode works)")
    if not settings.side_model.configured:
        click.echo("    (summaries are written offline; the scene is only patched by hand)")
    click.echo(f"  recall: {recall}")
    click.echo(f"  web page: http://{settings.host}:{settings.port}/ (sign in with an API key)")
    click.echo(f"  access log: {'on' if settings.access_log else 'off (CHANGJI_ACCESS_LOG=1)'}")
    if settings.access_log:
        logging.getLogger("aiohttp.access").setLevel(logging.INFO)


def _supervise(settings: Settings, log_level: str) -> None:
    """Several workers (`api/supervisor.py`): the read models made ready once, the address bound here."""
    app = Changji(env=settings.event_store_env())
    try:
        runner = ProjectionRunner(app, ReadModels(settings.read_models_path), notifications(app, settings))
        replay_if_empty(runner)
        runner.catch_up()
        runner.store.writer.conn.close()
    finally:
        app.close()
    try:
        sockets = listening_sockets(settings.host, settings.port)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {settings.host}:{settings.port}: {exc}") from None
    _banner(settings, embedder_name(settings))
    fds = [sock.fileno() for sock in sockets]
    data_dir = str(settings.data_dir.resolve())
    try:
        count = settings.workers
        Supervisor(lambda index: worker_argv(index, count, fds, data_dir, log_level), count, fds).run()
    finally:
        for sock in sockets:
            sock.close()


def _serve_worker(settings: Settings, fds: list[int], index: int, parent: int) -> None:
    """One worker of `changji serve --workers N`, on the sockets its parent bound; it ends with it."""
    end_with_parent(parent)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s [worker {index}] %(name)s: %(message)s"))
    if settings.access_log:
        logging.getLogger("aiohttp.access").setLevel(logging.INFO)
    sockets = [socket.socket(fileno=fd) for fd in fds]
    app = create_app(settings)
    app[WORKER] = index
    serve_app(app, settings.host, settings.port, sockets, access_log_class=AccessLog, access_log=_access(settings))


def _access(settings: Settings) -> logging.Logger | None:
    return logging.getLogger("aiohttp.access") if settings.access_log else None


@main.group()
def keys() -> None:
    """Manage API keys (stored hashed; a key is shown only when created)."""


@keys.command("create")
@DATA_DIR
@click.option("--tenant", default=LOCAL_TENANT, show_default=True, help="whose key: the tenant it reads and writes")
@click.option("--label", default="", help="a note to tell keys apart in `keys list`")
def keys_create(data_dir: Path | None, tenant: str, label: str) -> None:
    """Make a key for a tenant and print it (the only time it is shown)."""
    settings = Settings.from_env(data_dir=data_dir)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    db = service_data(settings)
    key_id, key = db.create_key(tenant, label)
    click.echo(key)
    click.echo(f"(id {key_id}, tenant {tenant})", err=True)


@keys.command("list")
@DATA_DIR
def keys_list(data_dir: Path | None) -> None:
    """List the keys: id, tenant, when made, revoked or not, label (never the key)."""
    db = service_data(Settings.from_env(data_dir=data_dir))
    for key_id, tenant, label, created, revoked in db.list_keys():
        click.echo(f"{key_id}…  tenant={tenant}  created={created}{'  REVOKED' if revoked else ''}  {label}")


@keys.command("revoke")
@DATA_DIR
@click.argument("key_id")
def keys_revoke(data_dir: Path | None, key_id: str) -> None:
    """Revoke a key by its id (as `keys list` shows it): requests with it are refused from then on."""
    db = service_data(Settings.from_env(data_dir=data_dir))
    if not db.revoke(key_id):
        raise click.ClickException(f"no key with id {key_id}")
    click.echo(f"revoked {key_id}")


@main.group()
def projections() -> None:
    """Read models: rebuild them from the event log."""


@projections.command("rebuild")
@DATA_DIR
@click.option(
    "--wait", type=float, default=60.0, show_default=True, help="seconds to wait for a running service to switch"
)
def projections_rebuild(data_dir: Path | None, wait: float) -> None:
    """Replay every event into a new read-model file; a running service switches to it, or it is used from the next start."""
    settings = Settings.from_env(data_dir=data_dir)
    if settings.persistence == "memory":
        raise click.ClickException("read models in memory are rebuilt at every start")
    folder = settings.data_dir
    folder.mkdir(parents=True, exist_ok=True)
    target = read_model_files.new_file(folder)
    app, reader = Changji(env=settings.event_store_env()), None
    started = time.perf_counter()
    with read_model_files.building(target):  # until it is named: no promotion elsewhere removes it
        try:
            reader = notifications(app, settings)
            runner = ProjectionRunner(app, ReadModels(target), reader)
            total = runner.max_position()
            with click.progressbar(length=total, label=f"replaying {total:,} events", file=sys.stderr) as bar:
                position = runner.rebuild(progress=bar.update)
            runner.store.mark_rebuilt()
            if settings.database is not None:  # (which database it was folded from)
                from storage.postgres.service_db import identity

                runner.store.mark_folded_from(identity(settings.database))
            runner.store.writer.conn.close()
        finally:
            if reader is not None:
                reader.close()
            app.close()
        seconds = time.perf_counter() - started
        click.echo(
            f"rebuilt read models at position {position:,} in {seconds:.1f}s "
            f"({position / max(seconds, 1e-9):,.0f} events/s): {target.name}"
        )
        with read_model_files.unless_served(folder) as free:
            if free:
                read_model_files.promote(folder, target)
                click.echo("in use from the next start")
                return
            read_model_files.offer(folder, target)
    click.echo("offered to the running service…")
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if read_model_files.current(folder) == target:
            click.echo("the running service switched to it")
            return
        time.sleep(0.2)
    click.echo(f"the running service has not switched within {wait:.0f}s; it will at its next poll or start")


@main.command()
@DATA_DIR
@click.option("--to", "url", required=True, help="an empty PostgreSQL database: postgresql://user:password@host/db")
def migrate(data_dir: Path | None, url: str) -> None:
    """Copy a SQLite data dir's store (events, keys, blobs) into an empty PostgreSQL database."""
    from storage.postgres.migrate import NotEmpty, copy_data_dir, count_events

    try:
        target = Settings.from_env(data_dir=data_dir, database_url=url)
    except ValidationError as exc:
        raise click.ClickException(_reason(exc)) from None
    folder = target.data_dir
    if not (folder / "events.sqlite").exists():
        raise click.ClickException(f"no SQLite store in {folder} (events.sqlite)")
    with read_model_files.unless_served(folder) as free:
        if not free:
            raise click.ClickException(f"a service serves {folder}: stop it first (the copy is of a store at rest)")
        destination = Changji(env=target.event_store_env())
        started = time.perf_counter()
        try:
            total = count_events(folder)
            with click.progressbar(length=total, label=f"copying {total:,} events", file=sys.stderr) as bar:
                copied = copy_data_dir(folder, url, destination, bar.update)
        except NotEmpty as exc:
            raise click.ClickException(str(exc)) from None
        finally:
            destination.close()
    rows = ", ".join(f"{count:,} {table}" for table, count in (copied.rows or {}).items())
    click.echo(
        f"copied {copied.events:,} events and {copied.snapshots:,} snapshots ({rows}) in"
        f" {time.perf_counter() - started:.1f}s; start `changji serve` with CHANGJI_DATABASE_URL set to it"
        " (each process folds its read models from the log at its first start)"
    )


@main.command()
@DATA_DIR
@click.argument("story_id", type=click.UUID)
@click.option("--at", "at", type=click.UUID, default=None, help="end node (default: the leaf)")
@click.option("--tenant", default=LOCAL_TENANT, show_default=True)
@click.option("--from-depth", type=int, default=0)
@click.option("--limit", type=int, default=1000)
def replay(data_dir: Path | None, story_id: UUID, at: UUID | None, tenant: str, from_depth: int, limit: int) -> None:
    """Print the events of a path in order, with the context size after each step."""
    with _offline(data_dir) as service:
        replayed = service.views.replay(tenant, story_id, at, from_depth, limit)
    for step in replayed.steps:
        for event in step["events"]:
            data = {k: v for k, v in event["data"].items() if k not in ("story_id", "parent_id")}
            click.echo(f"d{step['depth']:<4} v{event['version']} {event['type']:<14} {_short(data)}")
        click.echo(f"      ↳ context: {step['context_messages']} messages, {step['context_tokens']} tokens")
    if replayed.next_depth is not None:
        click.echo(f"… more from depth {replayed.next_depth} (--from-depth {replayed.next_depth})")


IMPORTED = (".png", ".json", ".charx", ".jsonl")


@main.command("import")
@DATA_DIR
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--tenant", default=LOCAL_TENANT, show_default=True)
@click.option("--card", "card_id", type=click.UUID, default=None, help="the card chats and World Info files go to")
def import_files(data_dir: Path | None, paths: tuple[Path, ...], tenant: str, card_id: UUID | None) -> None:
    """Import cards (PNG, JSON, CHARX), World Info files and SillyTavern chats (.jsonl), files or folders.

    Cards become new cards; a World Info file is attached to --card, a chat becomes a new story of --card.
    Run it while no server serves the data dir (or post the files to the server's import routes)."""
    files = sorted({f for p in paths for f in ([p] if p.is_file() else p.rglob("*")) if f.suffix.lower() in IMPORTED})
    if not files:
        raise click.ClickException("no .png, .json, .charx or .jsonl files there")
    settings = Settings.from_env(data_dir=data_dir)
    with contextlib.ExitStack() as stack:
        if settings.persistence != "memory":
            try:
                stack.enter_context(read_model_files.serving(settings.data_dir))
            except read_model_files.AlreadyServed as exc:
                raise click.ClickException(f"{exc}: stop it, or post the files to its /v1/…/import routes") from None
        service = stack.enter_context(_offline(data_dir))
        failed = 0
        for number, path in enumerate(files, 1):
            click.echo(f"[{number}/{len(files)}] {path}", err=True)
            try:
                click.echo(_import_one(service, tenant, card_id, path))
            except (CardFormatError, ChatFormatError, LorebookFormatError, ValidationError, DomainError) as bad:
                failed += 1
                click.echo(f"refused  {path}: {_reason(bad)}", err=True)
    if failed:
        raise click.ClickException(f"{failed} of {len(files)} file(s) refused; the others were imported")


def _import_one(service: Service, tenant: str, card_id: UUID | None, path: Path) -> str:
    raw, importer = path.read_bytes(), service.importer
    if path.suffix.lower() == ".jsonl":
        if card_id is None:
            raise DomainError("a chat needs --card, the card it was played with")
        card = service.app.card(tenant, card_id)
        started = time.perf_counter()
        chat = importer.read_chat(card.data, raw, path.stem)
        click.echo(
            f"  read {len(chat.chat.steps):,} messages in {time.perf_counter() - started:.1f}s; saving…", err=True
        )
        story = importer.save_chat(tenant, card_id, uuid4(), chat).value
        seconds = time.perf_counter() - started
        return (
            f"story    {story.id}  {story.title}: {len(chat.chat.steps):,} messages, {story.imported_nodes:,} nodes "
            f"in {seconds:.1f}s" + (f" ({len(chat.plan.warnings)} warning(s))" if chat.plan.warnings else "")
        )
    try:
        read = importer.read_card(raw, path.name)
    except CardFormatError:
        if path.suffix.lower() != ".json" or card_id is None:
            raise
        book = importer.save_lorebook(tenant, card_id, uuid4(), importer.read_lorebook(raw, path.stem)).value
        return f"lorebook {book.id}  {book.name}: {len(book.entries)} entries, attached to card {card_id}"
    card = importer.save_card(tenant, uuid4(), read).value
    warned = f" — {'; '.join(card.source.get('warnings', []))}" if card.source.get("warnings") else ""
    return f"card     {card.id}  {card.data.name} ({read.file.container}, {read.file.spec}){warned}"


def _reason(bad: Exception) -> str:
    if isinstance(bad, ValidationError):
        first = bad.errors()[0]
        return f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
    return str(bad)


@contextmanager
def _offline(data_dir: Path | None) -> Iterator[Service]:
    """The service for a one-shot command: built, never started (no threads, no tasks); SQLite keeps
    its own checkpoints."""
    service = bootstrap(Settings.from_env(data_dir=data_dir), background_checkpoints=False)
    try:
        yield service
    finally:
        asyncio.run(service.recall.stop())
        service.app.close()
        service.keys.close()
        for connection in service.connections:
            connection.close()


def _short(data: dict[str, Any]) -> str:
    text = json.dumps(data, ensure_ascii=False, default=str)
    return text if len(text) <= 100 else text[:99] + "…"


@main.command("fake-model")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8790, show_default=True)
def fake_model(host: str, port: int) -> None:
    """An offline stand-in for an OpenAI-compatible model (for trying engine mode without a provider)."""
    from providers.fake_server import FakeModelServer, echo_writer

    async def run() -> None:
        async with FakeModelServer(echo_writer, host, port) as fake:
            click.echo(f"fake model at {fake.url}: CHANGJI_MAIN_BASE_URL={fake.url} CHANGJI_MAIN_MODEL=fake")
            await asyncio.Event().wait()

    asyncio.run(run())


@main.command()
@DATA_DIR
@click.option(
    "--from",
    "source",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="replay an external chat instead (MemoryBank JSON: the first user, or --user NAME)",
)
@click.option("--user", "user_name", default=None, help="which MemoryBank user to replay")
def demo(data_dir: Path | None, source: Path | None, user_name: str | None) -> None:
    """Play a sample story through the HTTP API and print the tree and the context with its explain list.

    Without --data-dir (or CHANGJI_DATA_DIR) the demo runs in a temporary directory and leaves nothing.
    """
    from api.demo import run_demo

    settings = Settings.from_env(data_dir=data_dir, port=0)
    temporary = data_dir is None and "CHANGJI_DATA_DIR" not in os.environ
    try:
        asyncio.run(run_demo(settings, source, user_name, temporary))
    except read_model_files.AlreadyServed as exc:
        raise click.ClickException(str(exc)) from None
