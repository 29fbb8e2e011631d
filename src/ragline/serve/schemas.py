"""Request and response models of the HTTP API: what the OpenAPI document shows.

Request text fields are cleaned and length-checked against the settings by the
handlers (see :mod:`ragline.validation`); the limits shown in the OpenAPI
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
    retry_after: int | None = Field(
        None, description="On 429 and 503: seconds to wait before trying again."
    )


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        description="What to look for (HTML stripped, whitespace collapsed).",
        examples=["How do I filter by chapter?"],
    )
    max_results: int | None = Field(None, description="Hits to return (default 10).")
    mode: SearchModeName | None = Field(None, description="bm25, vector or hybrid (default).")
    filters: dict[str, Any] | None = Field(
        None,
        description="Metadata filters: chunk fields and front-matter keys, as values "
        "(equality) or operators ($eq $ne $in $nin $gt $gte $lt $lte $exists) combined "
        "with $and/$or/$not (docs/search.md); the tenant filter is always the caller's.",
    )


#: The question's field names: ragline's own, then the specifications' aliases
#: (seed 002 ``message``, seed 003 ``query``); the first one present is the question.
QUESTION_FIELDS = ("question", "message", "query")


class QueryRequest(BaseModel):
    """ragline's request, which also takes the specifications' shapes: seed 002's
    ``{session_id, message, selected_text, conversation_id}`` and seed 003's
    ``{query}`` (aliases of ``question`` and ``context``; see docs/http-api.md)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"anyOf": [{"required": [name]} for name in QUESTION_FIELDS]},
    )

    question: str | None = Field(
        None,
        description="The question (HTML stripped, whitespace collapsed).",
        examples=["What does the section chunker do with tables?"],
    )
    message: str | None = Field(None, description="Alias of question (seed 002).")
    query: str | None = Field(None, description="Alias of question (seed 003).")
    context: str | None = Field(
        None, description="Text the user selected; the question is about it."
    )
    selected_text: str | None = Field(None, description="Alias of context (seed 002).")
    max_results: int | None = Field(None, description="Chunks to retrieve (default 10).")
    mode: SearchModeName | None = None
    filters: dict[str, Any] | None = None
    conversation_id: str | None = Field(
        None,
        pattern=ID_PATTERN,
        description="Continue this conversation: its last messages are sent as history.",
    )
    session_id: str | None = Field(
        None,
        pattern=ID_PATTERN,
        description="The client's session (seed 002); recorded in the query log.",
    )

    def question_field(self) -> tuple[str, str | None]:
        """(field name, text) of the question: the first of QUESTION_FIELDS given."""
        for name in QUESTION_FIELDS:
            value = getattr(self, name)
            if value is not None:
                return name, value
        return "question", None

    def context_text(self) -> tuple[str, str | None]:
        if self.context is not None:
            return "context", self.context
        return ("selected_text", self.selected_text)


class ConfidenceOut(BaseModel):
    score: float
    level: str
    reason: str


class SourceOut(BaseModel):
    number: int
    label: str
    chunk_id: str
    chunk_ids: list[str]
    doc_id: str
    chunk_index: int
    title: str
    chapter: str
    section: str
    page: int | None = Field(description="The PDF page the chunk starts on (None for text).")
    confidence: float = Field(description="The chunk's cosine relevance, clamped to 0–1.")
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
    doc_id: str
    chunk_index: int | None
    title: str
    chapter: str
    section: str
    page: int | None
    snippet: str = Field(description="The supporting sentence (support_text).")
    score: float | None = Field(description="The cited block's retrieval score.")
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
    chunks_retrieved: int
    chunksRetrieved: int = Field(description="Alias of chunks_retrieved (seed 003).")
    session_id: str | None = None
    conversation_note: str = Field(
        "",
        description="Why this exchange was not saved to the conversation (a full disk); "
        "the answer stands. Empty when it was saved.",
    )
    search_query: str = Field(
        "",
        description="What was searched: the question, or a "
        "follow-up made self-contained from the conversation.",
    )
    query_rewrite: str = Field("none", description="How: none, carry-over or llm.")
    search_phrasings: list[str] = Field(
        default_factory=list, description="Multi-query: the LLM's phrasings also searched."
    )
    query_expansion: str = Field("none", description="Multi-query: none, llm, empty or failed.")
    query_expansion_error: str = Field("", description="Why the LLM wrote no phrasings.")


class DebugOut(BaseModel):
    """Seed 000's debug block."""

    retrieval_ms: float
    llm_ms: float
    total_ms: float
    model: str
    chunks_retrieved: int
    prompt_tokens: int
    completion_tokens: int


class RelatedDocOut(BaseModel):
    doc_id: str
    title: str
    chapter: str
    source: str
    url: str


class QueryResponse(BaseModel):
    answer: str
    sources: list[SourceOut]
    citations: list[CitationOut]
    confidence: ConfidenceOut
    confidence_score: float = Field(description="confidence.score as a number (seeds 000, 004).")
    metadata: AnswerMetadata
    debug: DebugOut
    response_time_ms: int = Field(description="The answer's total time (seed 004).")
    relatedDocs: list[RelatedDocOut] = Field(
        description="The documents the retrieved chunks come from (seed 003)."
    )


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
