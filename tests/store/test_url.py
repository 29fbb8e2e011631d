"""STORE_URL parsing: every documented form, and errors that name the problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragline.settings import Settings
from ragline.store.base import StoreError
from ragline.store.factory import store_location
from ragline.store.url import StoreLocation, StoreUrlError, parse_store_url

IDX = Path("/srv/idx")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("", StoreLocation("lance", "/srv/idx/lance")),
        ("/data/other", StoreLocation("lance", "/data/other/lance")),
        ("lance:///data/other", StoreLocation("lance", "/data/other/lance")),
        (
            "postgres://u:secret@db:5432/rag?sslmode=require&schema=tenant_a",
            StoreLocation(
                "postgres",
                "postgres://u:secret@db:5432/rag?sslmode=require",
                {"schema": "tenant_a"},
            ),
        ),
        ("postgresql://db/rag", StoreLocation("postgres", "postgresql://db/rag", {})),
        ("qdrant://q1:6333", StoreLocation("qdrant", "http://q1:6333", {})),
        (
            "chroma://c1:8000/docs",
            StoreLocation("chroma", "http://c1:8000", {"collection": "docs"}),
        ),
        ("chroma://c1:8000", StoreLocation("chroma", "http://c1:8000", {"collection": "ragline"})),
        (
            "chroma+https://c1/docs",
            StoreLocation("chroma", "https://c1", {"collection": "docs"}),
        ),
        (
            "chroma+local:///tmp/c?collection=kb",
            StoreLocation("chroma", "/tmp/c", {"collection": "kb"}),
        ),
        ("chroma+local:///tmp/c", StoreLocation("chroma", "/tmp/c", {})),
        (
            "falkordb://g1:6379/kg",
            StoreLocation("falkordb", "redis://g1:6379", {"graph": "kg"}),
        ),
        (
            "qdrant+https://cloud.example:6333?collection=docs&api_key=k",
            StoreLocation(
                "qdrant", "https://cloud.example:6333", {"collection": "docs", "api_key": "k"}
            ),
        ),
        (
            "qdrant+local:///tmp/q?collection=c",
            StoreLocation("qdrant", "/tmp/q", {"collection": "c"}),
        ),
    ],
)
def test_every_documented_form(url: str, expected: StoreLocation) -> None:
    assert parse_store_url(url, IDX) == expected


def test_bare_postgres_reads_database_url() -> None:
    loc = parse_store_url("postgres", IDX, "postgresql://db/rag?schema=s1")
    assert loc == StoreLocation("postgres", "postgresql://db/rag", {"schema": "s1"})
    with pytest.raises(StoreUrlError, match="DATABASE_URL"):
        parse_store_url("postgres", IDX, "")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://db/x", "unknown scheme 'mysql'"),
        ("qdrant://:6333", "no host"),
        ("qdrant://q:6333?shards=3", "unknown parameter"),
        ("postgres://db/x?schema=", "empty"),
        ("qdrant+local://", "needs a folder"),
        ("chroma+local://", "needs a folder"),
        ("chroma+local:///x?shards=2", "unknown parameter"),
        ("chroma:///docs", "no host"),
        ("chroma://c:8000/a/b", "one name"),
        ("falkordb://g:6379/kg?x=1", "takes no parameters"),
    ],
)
def test_bad_urls_say_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(StoreUrlError, match=message):
        parse_store_url(url, IDX)


def test_descriptions_never_show_secrets() -> None:
    pg = parse_store_url("postgres://u:hunter2@db:5432/rag?schema=s", IDX)
    assert "hunter2" not in pg.describe() and "db:5432/rag" in pg.describe()
    qd = parse_store_url("qdrant://q:6333?api_key=hunter2&collection=c", IDX)
    assert "hunter2" not in qd.describe() and "collection=c" in qd.describe()
    with pytest.raises(StoreUrlError) as info:
        parse_store_url("mysql://u:hunter2@db/x", IDX)
    assert "hunter2" not in str(info.value)


def test_settings_choose_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORE_URL", "postgres")
    monkeypatch.setenv("DATABASE_URL", "postgresql://db/rag")
    assert store_location(Settings()).kind == "postgres"
    monkeypatch.setenv("STORE_URL", "ftp://x")
    with pytest.raises(StoreError, match="unknown scheme"):
        store_location(Settings())
