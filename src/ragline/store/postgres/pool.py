"""Connections to PostgreSQL: a pool per URL, retries after a lost connection,
errors that name the server (never the password) and what was being done.

Reads that serve searches may go to a replica (``read_url``); everything a
write depends on uses the primary. Every pooled connection gets the store's
schema first on its search path, pgvector's types and the statement timeout.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import psycopg
from pgvector.psycopg import register_vector
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolTimeout

from ragline.retry import RetryPolicy
from ragline.store.base import StoreError

T = TypeVar("T")


def redact_url(url: str) -> str:
    """``host:port/db`` of a connection URL: errors name the server, never the password."""
    try:
        parts = urlsplit(url)
        where = parts.hostname or "localhost"
        if parts.port:
            where += f":{parts.port}"
        return f"{where}{parts.path or ''}"
    except ValueError:
        return "(unparsable database URL)"


class Connections:
    """The pools of one store and the retry policy around every call."""

    def __init__(
        self,
        url: str,
        read_url: str | None,
        schema: str | None,
        *,
        pool_size: int,
        statement_timeout_s: float,
        write_timeout_s: float,
        connect_timeout_s: float,
        retry: RetryPolicy,
    ) -> None:
        self.url = url
        self.read_url = read_url
        self.schema = schema
        self.where = redact_url(url)
        self.pool_size = pool_size
        self.statement_timeout_s = statement_timeout_s
        self.write_timeout_s = write_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.retry = retry
        self._closed = False
        self._pool: ConnectionPool | None = None
        self._read_pool: ConnectionPool | None = None

    def open(self) -> None:
        """Open the pools (connections are made in the background, on demand)."""
        self._pool = self._make_pool(self.url, self.pool_size, "write")
        self._read_pool = (
            self._make_pool(self.read_url, self.pool_size, "read")
            if self.read_url and self.read_url != self.url
            else self._pool
        )

    @property
    def primary(self) -> ConnectionPool:
        if self._pool is None:
            raise StoreError(f"PostgreSQL {self.where}: the store is not open")
        return self._pool

    def _make_pool(self, url: str, size: int, name: str) -> ConnectionPool:
        timeout_ms = round(self.statement_timeout_s * 1000)

        def configure(conn: psycopg.Connection[Any]) -> None:
            if self.schema:
                conn.execute(
                    "SELECT set_config('search_path', %s || ', ' || "
                    "current_setting('search_path'), false)",
                    (self.schema,),
                )
            register_vector(conn)
            conn.execute("SELECT set_config('statement_timeout', %s, false)", (f"{timeout_ms}",))

        pool = ConnectionPool(
            url,
            min_size=1,
            max_size=size,
            kwargs={
                "autocommit": True,
                "connect_timeout": max(1, round(self.connect_timeout_s)),
                "application_name": "ragline",
            },
            configure=configure,
            check=ConnectionPool.check_connection,
            name=f"ragline-{name}",
            open=False,
        )
        pool.open(wait=False)
        return pool

    def attempt(self, fn: Callable[[], T], what: str, *, connect: bool = False) -> T:
        """Run ``fn``; on a lost or refused connection retry with backoff, then fail
        with a StoreError naming the server and what was being done."""
        attempt = 0
        while True:
            if self._closed:
                raise StoreError(f"PostgreSQL {self.where}: the store is closed")
            try:
                return fn()
            except StoreError:
                raise
            except pg_errors.QueryCanceled as exc:
                raise StoreError(
                    f"PostgreSQL {self.where}: {what}: cancelled by the statement timeout "
                    f"(RAGLINE_PG_STATEMENT_TIMEOUT_S {self.statement_timeout_s:g} s, writes "
                    f"RAGLINE_PG_WRITE_TIMEOUT_S {self.write_timeout_s:g} s): {exc}"
                ) from exc
            except (
                psycopg.OperationalError,
                psycopg.InterfaceError,
                pg_errors.TransactionRollback,
                PoolTimeout,
            ) as exc:
                delay = self.retry.delay(attempt, random.random())
                if attempt >= self.retry.max_retries or delay is None:
                    kind = "cannot connect" if connect else "connection lost"
                    raise StoreError(
                        f"PostgreSQL {self.where}: {kind} while {what} "
                        f"(gave up after {attempt + 1} attempts): {str(exc).strip()}"
                    ) from exc
                attempt += 1
                time.sleep(delay)
            except psycopg.Error as exc:
                raise StoreError(f"PostgreSQL {self.where}: {what} failed: {exc}") from exc

    def run(self, fn: Callable[[psycopg.Connection[Any]], T], what: str, read: bool = False) -> T:
        pool = (self._read_pool if read else self._pool) or self.primary

        def once() -> T:
            with pool.connection(timeout=self.connect_timeout_s) as conn:
                return fn(conn)

        return self.attempt(once, what)

    def write_timeout(self, conn: psycopg.Connection[Any]) -> None:
        """A write batch (COPY of its chunks and postings) gets ``write_timeout_s``."""
        conn.execute(
            "SELECT set_config('statement_timeout', %s, true)",
            (f"{round(self.write_timeout_s * 1000)}",),
        )

    def close(self) -> None:
        """Close the pools; later calls raise StoreError."""
        if self._closed:
            return
        self._closed = True
        if self._read_pool is not None and self._read_pool is not self._pool:
            self._read_pool.close()
        if self._pool is not None:
            self._pool.close()
