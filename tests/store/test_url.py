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


def test_a_new_backend_needs_only_its_record(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A store added to ``BACKENDS`` is parsed, checked for its folder and opened by the
    factory with no change there (docs/stores.md "Adding a store")."""
    from ragline.store import url
    from ragline.store.address import StoreBackend, local_folder
    from ragline.store.factory import missing_index, open_store
    from ragline.store.lance_address import LANCE

    opened: list[StoreLocation] = []

    def parse(scheme: str, text: str) -> StoreLocation:
        folder, _ = local_folder(scheme, text)
        return StoreLocation("memo", folder)

    def open_memo(location: StoreLocation, settings: Settings, dimension: int) -> object:
        opened.append(location)
        return LANCE.open(location, settings, dimension)

    memo = StoreBackend("memo", ("memo",), parse, open_memo, lambda loc: True)  # type: ignore[arg-type]
    monkeypatch.setattr(url, "BACKENDS", (*url.BACKENDS, memo))
    monkeypatch.setenv("STORE_URL", f"memo://{tmp_path / 'm'}")
    settings = Settings()
    assert missing_index(settings) == tmp_path / "m"  # read commands refuse a missing folder
    location = store_location(settings)
    assert location == StoreLocation("memo", str(tmp_path / "m"))
    assert "memo+local://" in location.describe()
    store = open_store(location, settings, 4)
    try:
        assert opened == [location] and store.info().chunks == 0
    finally:
        store.close()
    assert missing_index(settings) is None  # opening created it


def test_every_backend_owns_its_schemes() -> None:
    from ragline.store.url import BACKENDS, backend

    schemes = [s for b in BACKENDS for s in b.schemes]
    assert len(schemes) == len(set(schemes)), "two backends claim one scheme"
    for b in BACKENDS:
        assert backend(b.kind) is b
    with pytest.raises(StoreUrlError, match="no store backend"):
        backend("mysql")
