"""Query log: every field round-trips, privacy, hashing, tenant scope, and failing
storage that turns into ``False`` instead of an exception."""

from __future__ import annotations

import json
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path

import pytest

from ragline.engine import Ragline
from ragline.serve.querylog import (
    SALT_FILE,
    SCHEMA_VERSION,
    NullQueryLog,
    QueryLogError,
    QueryLogRow,
    SqliteQueryLog,
    hash_ip,
    hash_question,
    load_salt,
    make_query_log,
    new_row,
    persisted_salt,
    status_label,
    utc_now,
)
from ragline.settings import Settings


def full_row(query_id: str = "q1", tenant: str = "acme", created_at: str = "") -> QueryLogRow:
    """A row whose every field differs from its default."""
    return QueryLogRow(
        query_id=query_id,
        created_at=created_at or "2025-01-02T03:04:05.123456+00:00",
        tenant=tenant,
        endpoint="/api/query",
        ip_hash="ab" * 32,
        question_hash="cd" * 32,
        question="What is dropout? «ünïcode»",
        retrieved_chunk_ids=["c1", "c2", "c3"],
        confidence_level="medium",
        confidence_score=0.5625,
        fallback=True,
        latencies_ms={"retrieve": 12.5, "generate": 30.25, "retrieve.bm25": 1.0},
        status_code=503,
        error="generator unavailable",
        citations=4,
        citations_removed=2,
        generator="openai",
        model="gpt-test",
        total_tokens=321,
        citations_unsupported=1,
        status="timeout",
        session_id="550e8400-e29b-41d4-a716-446655440000",
        conversation_id="conv1",
        answer="Dropout zeroes activations [1].",
        answer_hash="ef" * 32,
        answer_chars=31,
        cited_chunk_ids=["c2"],
        response_time_ms=45.5,
    )


@pytest.fixture
def qlog(tmp_path: Path) -> Iterator[SqliteQueryLog]:
    log = SqliteQueryLog(tmp_path / "querylog.sqlite3", timeout_s=0.1)
    yield log
    log.close()


def test_every_field_round_trips(qlog: SqliteQueryLog) -> None:
    row = full_row()
    defaults = QueryLogRow("q", "t", "x", "/e", "i", "h")
    changed = [f.name for f in fields(row) if getattr(row, f.name) != getattr(defaults, f.name)]
    assert changed == [f.name for f in fields(row)]  # the test covers every field
    assert qlog.write(row) is True
    assert qlog.rows("acme") == [row]


def test_a_fresh_file_is_wal_and_versioned(qlog: SqliteQueryLog) -> None:
    assert qlog.write(full_row())
    conn = sqlite3.connect(qlog.path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()


def test_rows_are_tenant_scoped_newest_first(qlog: SqliteQueryLog) -> None:
    for i in range(5):
        tenant = "a" if i % 2 == 0 else "b"
        assert qlog.write(full_row(f"q{i}", tenant, f"2025-01-01T00:00:0{i}.000000+00:00"))
    assert [r.query_id for r in qlog.rows("a")] == ["q4", "q2", "q0"]
    assert [r.query_id for r in qlog.rows("b")] == ["q3", "q1"]
    assert [r.query_id for r in qlog.rows("a", limit=2)] == ["q4", "q2"]
    assert qlog.rows("nobody") == []
    with pytest.raises(ValueError, match="limit"):
        qlog.rows("a", limit=0)


def test_privacy_mode_keeps_only_the_hash(tmp_path: Path) -> None:
    question = "my secret diagnosis question"
    row = new_row(
        tenant="t", endpoint="/api/chat", ip="10.1.2.3", question=question, salt="s" * 32,
        privacy=True,
    )  # fmt: skip
    assert row.question is None
    assert row.question_hash == hash_question(question, "s" * 32)
    # The store enforces privacy too, even when a caller passes the text along.
    log = SqliteQueryLog(tmp_path / "q.sqlite3", privacy=True)
    leaky = new_row(
        tenant="t", endpoint="/api/chat", ip="10.1.2.3", question=question, salt="s" * 32,
        privacy=False,
    )  # fmt: skip
    assert log.write(leaky)
    (stored,) = log.rows("t")
    assert stored.question is None and stored.question_hash == leaky.question_hash
    log.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert question.encode() not in raw and b"10.1.2.3" not in raw


def test_new_row_without_privacy_keeps_the_question() -> None:
    row = new_row(
        tenant="t", endpoint="/api/query", ip="10.1.2.3", question="Why?", salt="x" * 32,
        privacy=False,
    )  # fmt: skip
    assert row.question == "Why?" and len(row.query_id) == 32
    assert row.created_at.endswith("+00:00")
    assert row.ip_hash == hash_ip("10.1.2.3", "x" * 32) and "10.1.2.3" not in row.ip_hash


def test_hashes_are_salted_and_normalised() -> None:
    a, b = "salt-a" * 4, "salt-b" * 4
    assert hash_ip("203.0.113.9", a) != hash_ip("203.0.113.9", b)
    assert hash_ip("203.0.113.9", a) == hash_ip("203.0.113.9", a)
    assert hash_ip("203.0.113.9", a) != hash_ip("203.0.113.10", a)
    assert hash_ip("2001:db8::1", a) == hash_ip("2001:0db8:0000::0001", a)
    assert len(hash_ip("testclient", a)) == 64  # not an IP: hashed as given
    assert hash_question("What  is\nDropout?", a) == hash_question("what is dropout?", a)
    assert hash_question("what is dropout?", a) != hash_question("what is dropout?", b)
    assert hash_question("what is dropout?") != hash_question("what is dropout?", a)


def test_salt_file_is_made_once_with_mode_0600(tmp_path: Path) -> None:
    settings = Settings(index_dir=tmp_path / "index")
    salt = load_salt(settings)
    path = tmp_path / "index" / SALT_FILE
    assert len(salt) == 64 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_salt(settings) == salt == persisted_salt(path)
    assert load_salt(Settings(index_dir=tmp_path / "other")) != salt  # random per index
    assert load_salt(Settings(index_dir=tmp_path, query_log_salt="configured-salt")) == (
        "configured-salt"
    )
    path.write_text("")
    with pytest.raises(QueryLogError, match="too short"):
        persisted_salt(path)


def test_workers_starting_together_share_one_salt(tmp_path: Path) -> None:
    code = "import sys; from pathlib import Path; from ragline.serve.querylog import "
    code += "persisted_salt; print(persisted_salt(Path(sys.argv[1])))"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path / SALT_FILE)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    salts = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(salts) == 1 and len(salts.pop()) == 64
    assert sorted(p.name for p in tmp_path.iterdir()) == [SALT_FILE]  # no temp files left


def test_record_answer_copies_a_real_answer(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "dropout.md").write_text(
        "# Dropout\n\nDropout randomly zeroes activations during training so that a network "
        "does not rely on single units. It is a regulariser that reduces overfitting.\n"
    )
    rag = make_rag()
    rag.ingest(docs)
    answer = rag.ask("What does dropout do during training?")
    row = new_row(
        tenant="default", endpoint="/api/query", ip="127.0.0.1", question=answer.question,
        salt="k" * 32, privacy=False,
    )  # fmt: skip
    row.record_answer(answer)
    assert row.retrieved_chunk_ids == [s.hit.chunk.id for s in answer.sources] != []
    assert row.confidence_level == answer.confidence.level
    assert row.confidence_score == pytest.approx(answer.confidence.score)
    assert row.fallback is answer.fallback
    assert row.citations == len(answer.citations)
    assert row.generator == "extractive" and row.latencies_ms == answer.timings_ms
    log = SqliteQueryLog(tmp_path / "q.sqlite3")
    assert log.write(row) and log.rows("default") == [row]
    log.close()


# --- failures: write returns False, never raises -------------------------------------------


def test_file_replaced_by_a_directory(
    qlog: SqliteQueryLog, caplog: pytest.LogCaptureFixture
) -> None:
    assert qlog.write(full_row("before"))
    for p in qlog.path.parent.glob("querylog.sqlite3*"):
        p.unlink()
    qlog.path.mkdir()
    assert qlog.write(full_row("during")) is False
    assert "query log write" in caplog.text and "directory" in caplog.text
    qlog.path.rmdir()  # repaired: the next write starts a new file
    assert qlog.write(full_row("after")) is True
    assert [r.query_id for r in qlog.rows("acme")] == ["after"]


def test_folder_removed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "index"
    folder.mkdir()
    log = SqliteQueryLog(folder / "querylog.sqlite3")
    assert log.write(full_row("before"))
    shutil.rmtree(folder)
    assert log.write(full_row("during")) is False
    assert "failed" in caplog.text
    with pytest.raises(QueryLogError, match="cannot be read"):
        log.rows("acme")
    log.close()


def test_deleted_file_is_started_anew(
    qlog: SqliteQueryLog, caplog: pytest.LogCaptureFixture
) -> None:
    assert qlog.write(full_row("before"))
    qlog.path.unlink()
    assert qlog.write(full_row("after")) is False  # earlier rows are lost: a failure
    assert qlog.write(full_row("next")) is True
    assert "deleted or replaced" in caplog.text
    assert qlog.path.exists()
    assert sorted(r.query_id for r in qlog.rows("acme")) == ["after", "next"]


def test_locked_database(qlog: SqliteQueryLog, caplog: pytest.LogCaptureFixture) -> None:
    assert qlog.write(full_row("before"))
    other = sqlite3.connect(qlog.path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
    try:
        assert qlog.write(full_row("during")) is False
        assert "locked" in caplog.text
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert qlog.write(full_row("after")) is True


def test_newer_schema_is_not_written(qlog: SqliteQueryLog, tmp_path: Path) -> None:
    assert qlog.write(full_row())
    qlog.close()
    conn = sqlite3.connect(qlog.path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    assert qlog.write(full_row("q2")) is False
    assert SqliteQueryLog(qlog.path).write(full_row("q3")) is False


_CHILD = """
import json, os, resource, signal, sys
from pathlib import Path
from ragline.serve.querylog import SqliteQueryLog, QueryLogRow
mode, path = sys.argv[1], Path(sys.argv[2])
row = QueryLogRow("child", "2025-01-01T00:00:00.000000+00:00", "acme", "/api/query", "i", "h",
                  question="x" * 200_000)
if mode == "readonly" and os.geteuid() == 0:
    os.setgid(65534); os.setuid(65534)  # root ignores file modes: act as nobody
log = SqliteQueryLog(path, timeout_s=0.1)
if mode == "full":
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill, like ENOSPC
    resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size, resource.RLIM_INFINITY))
ok = log.write(row)
print(json.dumps({"ok": ok}))
"""


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder an unprivileged user can reach (pytest's tmp_path is private to root)."""
    d = Path(tempfile.mkdtemp(prefix="ragline-qlog-"))
    d.chmod(0o755)
    yield d
    for p in (d, *d.rglob("*")):
        p.chmod(0o755 if p.is_dir() else 0o644)
    shutil.rmtree(d)


def _run_child(mode: str, path: Path) -> tuple[bool, str]:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert proc.returncode == 0, proc.stderr
    return bool(json.loads(proc.stdout)["ok"]), proc.stderr


def test_read_only_database(shared_dir: Path) -> None:
    path = shared_dir / "querylog.sqlite3"
    log = SqliteQueryLog(path)
    assert log.write(full_row("before"))
    log.close()  # checkpoints and removes the -wal/-shm files
    path.chmod(0o444)
    shared_dir.chmod(0o555)
    ok, stderr = _run_child("readonly", path)
    assert ok is False
    assert "query log write" in stderr and "readonly" in stderr.replace("read-only", "readonly")
    assert _ids(path) == ["before"]


def test_disk_full(shared_dir: Path) -> None:
    path = shared_dir / "querylog.sqlite3"
    log = SqliteQueryLog(path)
    assert log.write(full_row("before"))
    log.close()
    ok, stderr = _run_child("full", path)
    assert ok is False and "query log write" in stderr
    assert _ids(path) == ["before"]


def _ids(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT query_id FROM query_log")]
    finally:
        conn.close()


# --- choosing a store ------------------------------------------------------------------------


def test_make_query_log_follows_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(make_query_log(Settings(query_log_enabled=False)), NullQueryLog)
    default = make_query_log(Settings(index_dir=tmp_path / "idx"))
    assert isinstance(default, SqliteQueryLog)
    assert default.path == tmp_path / "idx" / "querylog.sqlite3" and default.path.exists()
    default.close()
    for url in (str(tmp_path / "a.sqlite3"), f"sqlite:///{tmp_path / 'b.sqlite3'}"):
        log = make_query_log(Settings(query_log_url=url, query_log_privacy=True))
        assert isinstance(log, SqliteQueryLog) and log.privacy and log.path.exists()
        log.close()
    with pytest.raises(QueryLogError, match="scheme 'mysql' is not supported"):
        make_query_log(Settings(query_log_url="mysql://db/x"))
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if psycopg were not installed
    with pytest.raises(QueryLogError, match="psycopg is not installed"):
        make_query_log(Settings(query_log_url="postgresql://u@127.0.0.1:1/x"))


def test_unusable_path_at_startup_only_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "file").write_text("not a folder")
    log = make_query_log(Settings(query_log_url=str(tmp_path / "file" / "q.sqlite3")))
    assert "cannot be opened" in caplog.text
    assert log.write(full_row()) is False
    log.close()


def test_retention_deletes_old_rows(tmp_path: Path) -> None:
    keep_all = SqliteQueryLog(tmp_path / "q.sqlite3")
    assert keep_all.write(full_row("old", created_at="2000-01-01T00:00:00.000000+00:00"))
    assert keep_all.write(full_row("recent", created_at=utc_now()))
    keep_all.close()
    pruning = SqliteQueryLog(tmp_path / "q.sqlite3", retention_days=30)
    assert pruning.write(full_row("new", created_at=utc_now()))
    assert sorted(r.query_id for r in pruning.rows("acme")) == ["new", "recent"]
    pruning.close()


def test_null_log_accepts_and_forgets() -> None:
    log = NullQueryLog()
    assert log.write(full_row()) is True and log.rows("acme") == []


def test_a_version_1_file_is_upgraded(tmp_path: Path) -> None:
    """A log written before the seed-status columns keeps its rows and takes new ones."""
    from ragline.serve.querylog import SQLITE_MIGRATIONS

    path = tmp_path / "querylog.sqlite3"
    conn = sqlite3.connect(path)
    for stmt in SQLITE_MIGRATIONS[1]:
        conn.execute(stmt)
    conn.execute(
        "INSERT INTO query_log VALUES ('old', '2025-01-01T00:00:00.000000+00:00', 'acme', "
        "'/api/query', 'i', 'h', 'q?', '[]', NULL, NULL, 0, '{}', 200, NULL, 0, 0, 0, '', '', 0)"
    )
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    log = SqliteQueryLog(path)
    try:
        assert log.write(full_row("new")) is True
        rows = {r.query_id: r for r in log.rows("acme")}
    finally:
        log.close()
    assert rows["old"].status == "success" and rows["old"].cited_chunk_ids == []
    assert rows["new"] == full_row("new")


@pytest.mark.parametrize(
    ("code", "error", "label"),
    [
        (200, None, "success"),
        (400, "question: too short", "error"),
        (413, None, "error"),
        (429, None, "rate_limited"),
        (500, None, "error"),
        (502, "LLM endpoint timed out after 30 s", "timeout"),
        (504, None, "timeout"),
    ],
)
def test_seed_statuses(code: int, error: str | None, label: str) -> None:
    assert status_label(code, error) == label
