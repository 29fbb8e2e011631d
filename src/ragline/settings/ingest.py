"""Ingestion: chunking, file and web sources, OCR, the limits that bound one file."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from ragline.settings.common import ChunkerName, Section


class IngestSettings(Section):
    """How documents are read, cut into chunks and written."""

    # --- ingestion ---------------------------------------------------------------
    base_url: str = Field(
        "", description="Prefix for chunk URLs (e.g. a docs site); file URLs when empty."
    )
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

    @model_validator(mode="after")
    def _check_ingest(self) -> Self:
        if self.chunk_overlap_tokens >= self.chunk_max_tokens:
            raise ValueError("chunk_overlap_tokens must be smaller than chunk_max_tokens")
        if self.recursive_overlap_chars >= self.recursive_chunk_chars:
            raise ValueError("recursive_overlap_chars must be smaller than recursive_chunk_chars")
        return self
