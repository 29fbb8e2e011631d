"""`ragline bench` end to end on a tiny folder (real model, real LanceDB), and the
synthetic corpus it builds its scale indexes from."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ragline.cli import app
from ragline.embed.base import Embedder
from ragline.eval.bench import load_queries, parse_modes, parse_scales
from ragline.eval.synthetic import (
    BLOCK_ROWS,
    DOC_CHUNKS,
    Synthetic,
    Window,
    document_writes,
    pseudo_queries,
    splice,
    word_windows,
)

runner = CliRunner()

TOPICS = {
    "volcanoes.md": (
        "Volcanoes",
        "A volcano erupts when magma rises through the crust. Lava flows cool into basalt, "
        "and ash clouds can ground aircraft for days. Stratovolcanoes build steep cones "
        "from layers of ash and lava, while shield volcanoes spread wide and flat.",
    ),
    "rivers.md": (
        "Rivers",
        "A river carves its valley over millennia. Meanders migrate across the floodplain, "
        "oxbow lakes form when a loop is cut off, and deltas grow where sediment settles "
        "at the mouth. Floods renew the soil of the plain with silt.",
    ),
    "glaciers.md": (
        "Glaciers",
        "Glaciers are rivers of ice that scrape and polish the bedrock beneath them. "
        "Moraines mark where a glacier stopped, and cirques are the bowls it carved "
        "high on the mountain. Meltwater feeds the rivers of the valley below.",
    ),
}


def write_folder(root: Path) -> Path:
    root.mkdir(parents=True)
    for name, (title, body) in TOPICS.items():
        sections = "\n\n".join(f"## Part {i}\n\n{body} (part {i})" for i in range(1, 4))
        (root / name).write_text(f"# {title}\n\n{sections}\n", encoding="utf-8")
    return root


def test_bench_cli_json_and_markdown(tmp_path: Path) -> None:
    docs = write_folder(tmp_path / "docs")
    report_md = tmp_path / "out" / "bench.md"
    res = runner.invoke(
        app,
        [
            "bench",
            str(docs),
            "--scale",
            "500",
            "--queries",
            "6",
            "--warmup",
            "1",
            "--work-dir",
            str(tmp_path),
            "--index",
            str(tmp_path / "unused-index"),
            "--out",
            str(report_md),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)

    g = r["ingest"]
    assert g["files"] == 3 and g["failed"] == 0 and g["chunks"] >= 3
    assert g["chunks_per_s"] > 0 and g["raw_chunks_per_s"] > 0 and g["ratio_to_raw"] > 0
    assert {"parse", "chunk", "embed", "write"} <= set(g["stage_shares"])
    shares = g["stage_shares"].values()
    assert all(0 <= v <= 1 for v in shares) and 0 < sum(shares) <= 1 + 1e-9
    assert g["index_bytes"] > 0 and g["peak_rss_bytes"] > 0

    (sc,) = r["scales"]
    assert sc["chunks"] == 500 and sc["spliced"] == 500 - g["chunks"]
    assert sc["index_bytes"] > 0
    assert sc["build_peak_rss_bytes"] > 0 and sc["search_peak_rss_bytes"] > 0
    assert sc["writes"] == 1 and sc["write_seconds"] > 0
    for path in ("search_only", "end_to_end"):
        assert set(sc[path]) == {"bm25", "vector", "hybrid"}
        for lat in sc[path].values():
            assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"]
    assert sc["end_to_end"]["vector"]["embed_p50"] > 0  # the query really was embedded
    assert sc["search_only"]["vector"]["embed_p50"] < sc["end_to_end"]["vector"]["p50"]
    assert sc["search_only"]["bm25"]["stages"]["keyword"] > 0

    assert r["data"]["pool_chunks"] == g["chunks"] and r["data"]["queries"] == 6
    assert "splices" in r["data"]["how"]
    assert r["machine"]["cores"] >= 1 and r["settings"]["store"] == "LanceStore"
    assert r["memory_method"] in {"VmHWM", "ru_maxrss"}

    md = report_md.read_text(encoding="utf-8")
    assert "## Ingestion" in md and "## Search latency (ms)" in md
    assert "| 500 | hybrid |" in md and "ragline bench" in md
    assert not list(tmp_path.glob("ragline-bench-*")), "temporary indexes were left behind"


def test_bench_defaults_to_the_index_source(tmp_path: Path, embedder: Embedder) -> None:
    from ragline.engine import Ragline
    from ragline.eval.bench import BenchConfig, run_bench
    from ragline.settings import Settings

    docs = write_folder(tmp_path / "docs")
    settings = Settings(index_dir=tmp_path / "index")
    rag = Ragline(settings, embedder=embedder)
    try:
        rag.ingest(docs)
    finally:
        rag.close()
    config = BenchConfig(scales=(60,), modes=("bm25",), queries=3, warmup=0, work_dir=tmp_path)
    report = run_bench(settings, config, embedder)
    assert report.data["ingest_path"] == str(docs.resolve())
    assert report.ingest is not None and report.ingest.files == 3
    assert [s.chunks for s in report.scales] == [60]
    assert set(report.scales[0].search_only) == {"bm25"}


def test_bench_rejects_bad_options(tmp_path: Path) -> None:
    for args, message in [
        (["--scale", "ten"], "not a count"),
        (["--scale", "1.2345k"], "whole number"),
        (["--modes", "fuzzy"], "--modes"),
    ]:
        res = runner.invoke(app, ["bench", str(tmp_path), *args])
        assert res.exit_code == 2, res.output
        assert message in res.output


def test_parse_scales_and_modes() -> None:
    assert parse_scales("1m, 10k,100k,10k") == [10_000, 100_000, 1_000_000]
    assert parse_scales("1.5k,500") == [500, 1500]
    with pytest.raises(ValueError, match="from 1"):
        parse_scales("0")
    assert parse_modes("hybrid,bm25,hybrid") == ["hybrid", "bm25"]
    with pytest.raises(ValueError):
        parse_modes("")


def test_load_queries_reads_jsonl_and_text(tmp_path: Path) -> None:
    f = tmp_path / "q.jsonl"
    f.write_text('{"_id": "1", "text": "first query"}\n\nsecond query\nfirst query\n')
    assert load_queries(f) == ["first query", "second query"]
    f.write_text('{"_id": "1"}\n')
    with pytest.raises(ValueError, match=r"q\.jsonl:1"):
        load_queries(f)


def _pool(n: int) -> list[Window]:
    return [Window(f"t{i}", "c", " ".join(f"w{i}x{j}" for j in range(10))) for i in range(n)]


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_synthetic_rows_are_prefix_stable_and_well_formed() -> None:
    pool = _pool(30)
    real = _unit(np.random.default_rng(0), 20, 8)  # 20 of 30 windows embedded
    data = Synthetic(pool, real, sigma=0.03, seed=3)
    n = BLOCK_ROWS + 700
    windows, vectors = data.rows(0, n)
    assert len(windows) == n and vectors.shape == (n, 8)
    # Any split of the range gives the same rows (lazy blocks, same seed).
    w2, v2 = data.rows(0, 250)
    w3, v3 = data.rows(250, n)
    assert w2 + w3 == windows and np.array_equal(np.concatenate([v2, v3]), vectors)
    again = Synthetic(pool, real, sigma=0.03, seed=3).rows(0, n)
    assert again[0] == windows and np.array_equal(again[1], vectors)
    # Embedded rows carry their own vector, pool rows their own text, all unit length.
    assert np.array_equal(vectors[:20], real)
    assert windows[:30] == pool
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Splices: first half of one pool window + second half of another.
    halves = {tuple(w.text.split()[:5]) for w in pool}, {tuple(w.text.split()[5:]) for w in pool}
    for w in windows[30:60]:
        words = w.text.split()
        assert tuple(words[:5]) in halves[0] and tuple(words[5:]) in halves[1]
    assert 0.5 < data.noisy_cosine < 1.0
    assert data.spliced(n) == n - 30 and data.spliced(10) == 0


def test_document_writes_cover_every_row_once() -> None:
    pool = _pool(5)
    data = Synthetic(pool, _unit(np.random.default_rng(1), 5, 4), sigma=0.1, seed=1)
    batches = list(document_writes(data, 95, batch_chunks=40, tenant="t"))
    docs = [w for b in batches for w in b]
    assert [len(w.chunks) for w in docs] == [DOC_CHUNKS] * 4 + [15]
    ids = [c.id for w in docs for c in w.chunks]
    assert len(set(ids)) == 95
    assert all(w.vectors.shape == (len(w.chunks), 4) for w in docs)
    assert all(c.tenant == "t" and c.doc_id == w.record.doc_id for w in docs for c in w.chunks)
    assert [sum(len(w.chunks) for w in b) for b in batches] == [40, 40, 15]


def test_word_windows_splice_and_pseudo_queries() -> None:
    words = [str(i) for i in range(10)]
    assert word_windows(words, 4, 3) == ["0 1 2 3", "3 4 5 6", "6 7 8 9"]
    assert word_windows(words[:3], 4, 3) == ["0 1 2"]
    assert splice("a b c d", "e f g h") == "a b g h"
    qs = pseudo_queries(_pool(10), 15, seed=2)
    assert len(set(qs)) == 15
    assert all(4 <= len(q.split()) <= 10 for q in qs)
    with pytest.raises(ValueError, match="distinct queries"):
        pseudo_queries([Window("t", "c", "one two three four")], 5, seed=2)


def test_bench_refuses_a_configured_store_url(tmp_path: Path, embedder: Embedder) -> None:
    from ragline.eval.bench import BenchConfig, run_bench
    from ragline.settings import Settings

    target = tmp_path / "users-own-index"
    settings = Settings(index_dir=tmp_path / "index", store_url=f"lance://{target}")
    config = BenchConfig(scales=(60,), modes=("bm25",), queries=3, warmup=0, work_dir=tmp_path)
    with pytest.raises(ValueError, match="STORE_URL"):
        run_bench(settings, config, embedder)
    assert not target.exists()  # nothing was written to the configured store
