"""HTTP GETs of the web ingester: conditional (ETag / Last-Modified), size-capped."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from ragline.errors import FaultError


class FetchError(FaultError):
    """A page could not be fetched (network error, HTTP error, too large)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status, 0 when there was no answer

    @property
    def gone(self) -> bool:
        """404 / 410: the page no longer exists (its document is deleted)."""
        return self.status in (404, 410)


@dataclass(frozen=True, slots=True)
class Validators:
    """What a previous fetch returned, sent back so an unchanged page answers 304."""

    etag: str = ""
    last_modified: str = ""

    def headers(self) -> dict[str, str]:
        h: dict[str, str] = {}
        if self.etag:
            h["If-None-Match"] = self.etag
        if self.last_modified:
            h["If-Modified-Since"] = self.last_modified
        return h


@dataclass(frozen=True, slots=True)
class FetchResult:
    url: str  # after redirects
    status: int  # 200, or 304 when the validators still hold
    data: bytes
    content_type: str  # media type, lower case, without parameters
    charset: str  # from Content-Type, "" when absent
    validators: Validators

    @property
    def not_modified(self) -> bool:
        return self.status == 304

    def text(self) -> str:
        """The body as text: the declared charset, else UTF-8 (bad bytes replaced)."""
        try:
            return self.data.decode(self.charset or "utf-8", errors="replace")
        except LookupError:  # an unknown charset name
            return self.data.decode("utf-8", errors="replace")


class Fetcher:
    """One HTTP client for a whole crawl (connections are reused)."""

    def __init__(self, *, user_agent: str, timeout_s: float, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._client = httpx.Client(
            headers={"User-Agent": user_agent},
            timeout=timeout_s,
            follow_redirects=True,
            max_redirects=10,
        )

    def get(self, url: str, validators: Validators | None = None) -> FetchResult:
        """GET ``url``; 200 and 304 are results, anything else raises FetchError."""
        headers = validators.headers() if validators else {}
        try:
            with self._client.stream("GET", url, headers=headers) as resp:
                if resp.status_code not in (200, 304):
                    raise FetchError(
                        f"HTTP {resp.status_code} {resp.reason_phrase}".strip(), resp.status_code
                    )
                declared = resp.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.max_bytes:
                    raise FetchError(self._too_big(int(declared)))
                body = bytearray()
                for part in resp.iter_bytes():
                    body += part
                    if len(body) > self.max_bytes:
                        raise FetchError(self._too_big(len(body)))
                media, _, params = resp.headers.get("content-type", "").partition(";")
                charset = ""
                for param in params.split(";"):
                    key, _, value = param.strip().partition("=")
                    if key.lower() == "charset":
                        charset = value.strip().strip('"')
                got = Validators(
                    resp.headers.get("etag", ""), resp.headers.get("last-modified", "")
                )
                if resp.status_code == 304 and validators is not None:
                    got = Validators(
                        got.etag or validators.etag, got.last_modified or validators.last_modified
                    )
                return FetchResult(
                    str(resp.url),
                    resp.status_code,
                    bytes(body),
                    media.strip().lower(),
                    charset,
                    got,
                )
        except httpx.HTTPError as e:
            raise FetchError(f"{type(e).__name__}: {e}") from None

    def status_and_text(self, url: str) -> tuple[int, str]:
        """(status, body) of a plain GET, for robots.txt; status 0 when unreachable."""
        try:
            resp = self._client.get(url)
        except httpx.HTTPError:
            return 0, ""
        if len(resp.content) > self.max_bytes:
            return 200, ""
        return resp.status_code, resp.text

    def _too_big(self, size: int) -> str:
        return (
            f"page is {size:,} bytes, over the limit of {self.max_bytes:,} (RAGLINE_MAX_FILE_BYTES)"
        )

    def close(self) -> None:
        self._client.close()
