"""`ragline serve`: run the HTTP API and web UI with uvicorn."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragline import logs

if TYPE_CHECKING:  # imported when `serve` runs: `ragline --help` stays light
    from ragline.settings import Settings


def settings_or_exit(update: dict[str, object]) -> Settings:
    """Settings from the environment with the command line's choices on top; an
    invalid one is a usage error (exit 2) naming the setting."""
    from pydantic import ValidationError

    from ragline.settings import Settings, invalid_setting

    try:
        return Settings(**update)
    except ValidationError as e:
        typer.echo(f"error: {invalid_setting(e)}", err=True)
        raise typer.Exit(2) from None


def serve(
    host: Annotated[
        str | None, typer.Option("--host", help="Address to bind (default: $RAGLINE_SERVE_HOST).")
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port (default: $RAGLINE_SERVE_PORT or 8000).")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            help="Worker processes; each loads the model. They share one rate limit through "
            "a SQLite file (RAGLINE_RATE_LIMIT_BACKEND; default <index>/ratelimit.sqlite3).",
        ),
    ] = None,
    index: Annotated[
        Path | None,
        typer.Option("--index", help="Index folder (default: $RAGLINE_INDEX_DIR or ./.ragline)."),
    ] = None,
    create: Annotated[
        bool,
        typer.Option(
            "--create",
            help="Start on a new, empty index when the folder does not exist (documents "
            "then come through POST /api/documents); without it a missing index is an error.",
        ),
    ] = False,
) -> None:
    """Serve the JSON API, SSE chat, OpenAI-compatible endpoints and the web chat UI."""
    import uvicorn

    update: dict[str, object] = {}
    if host is not None:
        update["serve_host"] = host
    if port is not None:
        update["serve_port"] = port
    if workers is not None:
        update["serve_workers"] = workers
    if index is not None:
        update["index_dir"] = index
    settings = settings_or_exit(update)
    logs.configure(settings.log_format)
    missing = missing_index(settings)
    if missing is not None and not create:
        # A missing folder used to become a new, empty index answering "I don't know".
        typer.echo(
            f"error: no index at {missing}: build one with `ragline ingest PATH --index "
            f"{missing}` (or start an empty one with `ragline serve --create`)",
            err=True,
        )
        raise typer.Exit(1)
    if settings.serve_workers > 1:
        # Each worker process builds its own app from the environment: pass the
        # command line's choices on through it.
        os.environ["RAGLINE_INDEX_DIR"] = str(settings.index_dir)
        backend = shared_rate_limit_backend(settings)
        if backend != settings.rate_limit_backend:
            os.environ["RAGLINE_RATE_LIMIT_BACKEND"] = backend
            typer.echo(
                f"rate limit shared by the {settings.serve_workers} workers through {backend}"
            )
        with shared_metrics_dir() as metrics_dir:
            typer.echo(
                f"metrics of the {settings.serve_workers} workers shared through {metrics_dir}"
            )
            uvicorn.run(
                "ragline.serve.cli:app_from_env",
                factory=True,
                host=settings.serve_host,
                port=settings.serve_port,
                workers=settings.serve_workers,
                **proxy_options(settings),
                **log_options(settings),
            )
        return
    from ragline.serve.app import create_app

    uvicorn.run(
        create_app(settings),
        host=settings.serve_host,
        port=settings.serve_port,
        **proxy_options(settings),
        **log_options(settings),
    )


@contextlib.contextmanager
def shared_metrics_dir() -> Iterator[str]:
    """The folder the workers' Prometheus samples are written to, so that one scrape of
    ``/metrics`` counts every worker's requests (prometheus_client's multiprocess mode,
    chosen by ``PROMETHEUS_MULTIPROC_DIR`` before a worker imports it). A folder named
    by the user is used as it is; otherwise a new temporary one, removed at exit."""
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip()
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        yield given
        return
    folder = tempfile.mkdtemp(prefix="ragline-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder
    try:
        yield folder
    finally:
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
        shutil.rmtree(folder, ignore_errors=True)


def log_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's logging set up for ``RAGLINE_LOG_FORMAT`` (nothing: uvicorn's own)."""
    config = logs.uvicorn_log_config(settings.log_format)
    return {} if config is None else {"log_config": config}


def missing_index(settings: Settings) -> Path | None:
    """The index folder when the configured store keeps its index in a folder (LanceDB,
    Qdrant or Chroma local) that does not exist; a server store is never "missing" here."""
    from ragline.store.base import StoreError
    from ragline.store.factory import missing_index as missing_folder

    try:
        return missing_folder(settings)
    except StoreError:
        return None  # the app reports a bad store URL itself


def proxy_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's forwarded-header options: only the configured proxies are believed.

    uvicorn trusts 127.0.0.1 by default (or ``$FORWARDED_ALLOW_IPS``), so any local
    caller could name itself anyone in ``X-Forwarded-For`` and never be rate limited.
    """
    trusted = [p.strip() for p in settings.serve_trusted_proxies if p.strip()]
    return {"proxy_headers": bool(trusted), "forwarded_allow_ips": trusted}


def shared_rate_limit_backend(settings: Settings) -> str:
    """The limiter backend for several worker processes: the configured one, except
    that an in-memory limiter (one count per process, so N workers would admit N ×
    the limit) becomes a SQLite file in the index folder that every worker shares."""
    if settings.rate_limit_backend.strip() != "memory" or settings.rate_limit_per_minute == 0:
        return settings.rate_limit_backend
    return str(Path(settings.index_dir) / "ratelimit.sqlite3")


def app_from_env() -> object:
    """The app of one worker process (``uvicorn --factory``), from the environment."""
    from ragline.serve.app import create_app
    from ragline.settings import Settings

    settings = Settings()
    logs.configure(settings.log_format)
    return create_app(settings)
