"""An upload whose parse runs past the per-file budget is stopped: it fails with the
setting named, and the write lock it held is free for the next upload at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from .conftest import LiveServer


def test_a_slow_upload_does_not_block_the_next_past_the_budget(
    serve: Callable[..., LiveServer], tmp_path: Path
) -> None:
    live = serve(
        tmp_path / "index",
        ingest_file_timeout_s=1.0,
        ingest_budget_min_bytes=1024,
        max_markdown_lines=10**7,
        max_upload_bytes=32 * 1024 * 1024,
    )
    slow = "".join(f"# Heading {i}\n" for i in range(600_000)).encode()
    replies: dict[str, httpx.Response] = {}

    def post(key: str, name: str, data: bytes) -> None:
        with httpx.Client(base_url=live.url, timeout=90.0) as c:
            replies[key] = c.post("/api/documents", files={"file": (name, data, "text/markdown")})

    first = threading.Thread(target=post, args=("slow", "headings.md", slow))
    first.start()
    time.sleep(1.0)  # the slow upload is sent and takes the write lock first
    # the second upload waits for the lock; without the budget it waits for minutes
    text = b"# Okapi\n\nThe okapi is a forest giraffe of the Congo.\n"
    post("small", "okapi.md", text)
    first.join(90)
    assert replies["small"].status_code == 200, replies["small"].text
    assert replies["small"].json()["status"] == "indexed"
    assert replies["slow"].status_code != 200
    assert "RAGLINE_INGEST_FILE_TIMEOUT_S" in replies["slow"].text
    assert "headings.md" in replies["slow"].text
