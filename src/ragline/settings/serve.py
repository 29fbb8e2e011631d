"""Serving: rate limit, query log, API keys, the HTTP server and its request limits."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ragline.settings.common import Section, _env


class ServeSettings(Section):
    """The HTTP API, the MCP server and what they accept."""

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
