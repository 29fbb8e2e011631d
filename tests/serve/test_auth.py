"""API keys: hashed at rest, mapped to tenants, revocable; and the `ragline keys` CLI."""

from __future__ import annotations

import json
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragline.cli import app
from ragline.serve.auth import KEYS_FILE, KeyStore, bearer_key, hash_key, parse_key
from ragline.settings import Settings

runner = CliRunner()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[KeyStore]:
    s = KeyStore(Settings(index_dir=tmp_path / "index"))
    yield s
    s.close()


def test_keys_map_to_their_tenant_and_are_stored_hashed(store: KeyStore) -> None:
    id_a, key_a = store.create("acme", "ci bot")
    _, key_b = store.create("globex")
    assert key_a.startswith("rl_") and parse_key(key_a) == id_a and key_a != key_b
    assert store.tenant_for(key_a) == "acme"
    assert store.tenant_for(key_b) == "globex"
    assert store.path.name == KEYS_FILE and stat.S_IMODE(store.path.stat().st_mode) == 0o600
    raw = b"".join(p.read_bytes() for p in store.path.parent.iterdir())
    assert key_a.encode() not in raw and key_b.encode() not in raw
    assert _stored_hashes(store.path) == {hash_key(key_a), hash_key(key_b)}


def _stored_hashes(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT key_hash FROM api_keys")}
    finally:
        conn.close()


def test_wrong_malformed_and_forged_keys_get_no_tenant(store: KeyStore) -> None:
    key_id, key = store.create("acme")
    forged = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")  # right id, wrong secret
    unknown = key.replace(key_id, "0" * 16)  # well-formed, unknown id
    for bad in (forged, unknown, "", "rl_", "Bearer " + key, key_id, "x" * 80):
        assert store.tenant_for(bad) is None, bad


def test_revoke_takes_effect_for_other_open_stores(store: KeyStore) -> None:
    key_id, key = store.create("acme", "laptop")
    server = KeyStore(store.path)  # e.g. a running server process
    try:
        assert server.tenant_for(key) == "acme"
        assert store.revoke(key_id) is True
        assert server.tenant_for(key) is None
        assert store.revoke(key_id) is False  # already revoked
        assert store.revoke("nope") is False
    finally:
        server.close()
    (info,) = store.list()
    assert (info.key_id, info.tenant, info.name, info.active) == (key_id, "acme", "laptop", False)
    assert info.revoked_at is not None and info.revoked_at >= info.created_at


def test_list_filters_by_tenant(store: KeyStore) -> None:
    a1, _ = store.create("acme")
    b1, _ = store.create("globex")
    a2, _ = store.create("acme")
    assert [k.key_id for k in store.list("acme")] == [a1, a2]
    assert [k.key_id for k in store.list("globex")] == [b1]
    assert {k.key_id for k in store.list()} == {a1, a2, b1}


def test_bad_tenant_and_name_are_refused(store: KeyStore) -> None:
    with pytest.raises(ValueError, match="tenant"):
        store.create("a b")
    with pytest.raises(ValueError, match="tenant"):
        store.create("")
    for dots in (".", ".."):  # would name the uploads folder itself or its parent
        with pytest.raises(ValueError, match="tenant"):
            store.create(dots)
    with pytest.raises(ValueError, match="at most 200"):
        store.create("acme", "n" * 201)


def test_bearer_key_reads_both_headers() -> None:
    assert bearer_key("Bearer rl_x", None) == "rl_x"
    assert bearer_key("bearer  rl_x ", None) == "rl_x"
    assert bearer_key(None, " rl_y ") == "rl_y"
    assert bearer_key("Basic abc", "rl_z") == "rl_z"
    assert bearer_key("Bearer ", None) is None
    assert bearer_key(None, None) is None


def test_keys_cli_create_list_revoke(tmp_path: Path) -> None:
    index = str(tmp_path / "index")
    created = runner.invoke(
        app, ["keys", "create", "--tenant", "acme", "--name", "ci", "--index", index, "--json"]
    )
    assert created.exit_code == 0, created.output
    made = json.loads(created.stdout)
    assert made["tenant"] == "acme" and made["name"] == "ci"
    store = KeyStore(Path(index) / KEYS_FILE)
    try:
        assert store.tenant_for(made["key"]) == "acme"
    finally:
        store.close()

    plain = runner.invoke(app, ["keys", "create", "--tenant", "globex", "--index", index])
    assert plain.exit_code == 0, plain.output
    plain_key = plain.stdout.strip()
    assert parse_key(plain_key) is not None  # stdout is the key alone, for scripts

    listed = runner.invoke(app, ["keys", "list", "--index", index, "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert [r["tenant"] for r in rows] == ["acme", "globex"]
    assert all(r["active"] for r in rows)
    assert made["key"] not in listed.stdout and plain_key not in listed.stdout
    human = runner.invoke(app, ["keys", "list", "--index", index, "--tenant", "acme"])
    assert made["key_id"] in human.stdout and "globex" not in human.stdout

    revoked = runner.invoke(app, ["keys", "revoke", made["key_id"], "--index", index])
    assert revoked.exit_code == 0, revoked.output
    again = runner.invoke(app, ["keys", "revoke", made["key_id"], "--index", index])
    assert again.exit_code == 1 and "no active key" in again.output
    after = json.loads(runner.invoke(app, ["keys", "list", "--index", index, "--json"]).stdout)
    assert [r["active"] for r in after] == [False, True]

    bad = runner.invoke(app, ["keys", "create", "--tenant", "bad tenant", "--index", index])
    assert bad.exit_code == 2 and "tenant" in bad.output
