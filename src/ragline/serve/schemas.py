"""Request and response models of the HTTP API: what the OpenAPI document shows.

Request text fields are cleaned and length-checked against the settings by the
handlers (see :mod:`ragline.serve.validation`); the limits shown in the OpenAPI
document are filled in from the same settings when the app is built.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SearchModeName = Literal["bm25", "vector", "hybrid"]
FilterValue = str | int | float | bool
ID_PATTERN = r"^[A-Za-z0-9_\-]{1,64}$"
FILTER_KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


class ErrorBody(BaseModel):
    """Every error, on every endpoint."""

    error: str = Field(description="Short machine-readable code, e.g. invalid_request.")
    message: str = Field(description="What went wrong, for a person (names the field).")
    status_code: int
    field: str | None = Field(None, description="The request field at fault, when one is.")


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        description="What to look for (HTML stripped, whitespace collapsed).",
        examples=["How do I filter by chapter?"],
    )
    max_results: int | None = Field(None, description="Hits to return (default 10).")
    mode: SearchModeName | None = Field(None, description="bm25, vector or hybrid (default).")
    filters: dict[str, FilterValue] | None = Field(
        None,
        description="Equality filters on chunk metadata (chapter, has_code, …); the "
        "tenant filter is always the caller's.",
    )


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(
        description="The question (HTML stripped, whitespace collapsed).",
        examples=["What does the section chunker do with tables?"],
    )
    context: str | None = Field(
        None, description="Text the user selected; the question is about it."
    )
    max_results: int | None = Field(None, description="Chunks to retrieve (default 10).")
    mode: SearchModeName | None = None
    filters: dict[str, FilterValue] | None = None
    conversation_id: str | None = Field(
        None,
        pattern=ID_PATTERN,
        description="Continue this conversation: its last messages are sent as history.",
    )


class ConfidenceOut(BaseModel):
    score: float
    level: str
    reason: str


class SourceOut(BaseModel):
    number: int
    label: str
    chunk_id: str
    chunk_ids: list[str]
    title: str
    section: str
    heading_path: list[str]
    source: str
    url: str
    anchor: str
    score: float
    vector_score: float | None
    rank: int


class CitationOut(BaseModel):
    number: int
    marker: str
    span: list[int]
    chunk_id: str
    title: str
    section: str
    source: str
    url: str
    anchor: str
    claim: str
    support_span: list[int]
    support_text: str
    support_score: float
    supported: bool


class AnswerMetadata(BaseModel):
    query_id: str
    conversation_id: str | None = None
    question: str
    generator: str
    model: str
    fallback: bool
    smalltalk: bool
    complete: bool
    error: str | None
    suggestions: list[str]
    dropped_citations: list[str]
    unsupported_citations: int
    usage: dict[str, int]
    timings_ms: dict[str, float]
    retrieval_mode: str
    total_tokens: int


class QueryResponse(BaseModel):
    answer: str
    sources: list[SourceOut]
    citations: list[CitationOut]
    confidence: ConfidenceOut
    metadata: AnswerMetadata


class HitOut(BaseModel):
    id: str
    rank: int
    score: float
    vector_score: float | None
    keyword_score: float | None
    rerank_score: float | None
    expanded_from: str | None
    doc_id: str
    tenant: str
    source: str
    title: str
    chapter: str
    section: str
    heading_path: list[str]
    url: str
    chunk_index: int
    start_char: int
    end_char: int
    token_count: int
    has_code: bool
    has_equations: bool
    page: int | None
    text: str


class SearchResponse(BaseModel):
    query: str
    mode: str
    hits: list[HitOut]
    timings_ms: dict[str, float]
    query_id: str


class DocumentOut(BaseModel):
    doc_id: str
    filename: str = Field(description="The uploaded file's name, or the ingested file's name.")
    title: str
    chapter: str
    format: str
    chunk_count: int
    token_count: int
    file_hash: str
    ingested_at: str
    uploaded: bool = Field(description="True for files uploaded through the API.")


class DocumentList(BaseModel):
    documents: list[DocumentOut]
    total: int


class FailureOut(BaseModel):
    path: str
    reason: str
    line: int | None


class UploadResponse(BaseModel):
    """The ingest of one uploaded file."""

    document: DocumentOut | None
    status: Literal["indexed", "unchanged"]
    chunks: int
    chunks_embedded: int
    tokens: int
    seconds: float


class DeleteResponse(BaseModel):
    doc_id: str
    deleted: bool


class MessageOut(BaseModel):
    message_id: str
    role: str
    content: str
    created_at: str
    query_id: str | None
    answer: dict[str, Any] | None = Field(
        None, description="For assistant messages: the answer (citations, sources, confidence)."
    )


class ConversationOut(BaseModel):
    conversation_id: str
    title: str
    created_at: str
    updated_at: str
    messages: int


class ConversationList(BaseModel):
    conversations: list[ConversationOut]


class ConversationDetail(ConversationOut):
    history: list[MessageOut]


class HealthResponse(BaseModel):
    status: str


class ReadyResponse(BaseModel):
    status: str
    store: bool
    model: bool
    detail: str = ""


# --- OpenAI-compatible ------------------------------------------------------------------


class ContentPart(BaseModel):
    type: str
    text: str | None = None


class ChatMessageIn(BaseModel):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """OpenAI's request shape; sampling parameters are accepted and ignored (the
    configured generator decides), the last user message is the question."""

    model: str = Field(examples=["ragline"])
    messages: list[ChatMessageIn]
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    n: int | None = Field(None, description="Only 1 is supported.")
    user: str | None = None


class ChatMessageOut(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class ChoiceOut(BaseModel):
    index: int
    message: ChatMessageOut
    finish_reason: str


class UsageOut(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletionResponse(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChoiceOut]
    usage: UsageOut
    citations: list[dict[str, Any]] = Field(
        description="Each citation of the answer with its source (Citation and Source fields)."
    )
    sources: list[SourceOut]


class ModelOut(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelOut]
