"""Settings: env names of the specification, validation, and docs that list them all."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import AliasChoices, ValidationError

from ragline.settings import (
    SECTIONS,
    AnswerSettings,
    IngestSettings,
    RetrieveSettings,
    Settings,
)

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def env_name(field: str) -> str:
    alias = Settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"RAGLINE_{field.upper()}"


def test_every_setting_is_documented() -> None:
    text = DOC.read_text()
    missing = [env_name(f) for f in Settings.model_fields if f"`{env_name(f)}`" not in text]
    assert missing == []


def test_spec_names_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RRF_K", "30")
    monkeypatch.setenv("HYBRID_MERGE_METHOD", "weighted")
    monkeypatch.setenv("RETRIEVAL_TOP_K", "5")
    monkeypatch.setenv("RAGLINE_MAX_FILE_BYTES", "1024")
    s = Settings()
    assert (s.rrf_k, s.hybrid_merge_method, s.retrieval_top_k, s.max_file_bytes) == (
        30,
        "weighted",
        5,
        1024,
    )


@pytest.mark.parametrize(
    ("env", "value", "field"),
    [
        ("RRF_K", "0", "RRF_K"),
        ("HYBRID_MERGE_METHOD", "average", "HYBRID_MERGE_METHOD"),
        ("RAGLINE_TENANT", "a b", "tenant"),
        ("RAGLINE_CHUNK_OVERLAP_TOKENS", "600", "chunk_overlap_tokens"),
    ],
)
def test_bad_values_name_the_setting(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, field: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ValidationError, match=field):
        Settings()


def test_section_chunks_fit_the_embedding_window() -> None:
    assert Settings().effective_chunk_max_tokens == 256 - 32
    assert Settings(chunk_fit_model=False).effective_chunk_max_tokens == 512
    assert Settings(chunk_max_tokens=128).effective_chunk_max_tokens == 128


def test_e5_has_its_own_confidence_scale_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """multilingual-e5-small's cosines are compressed (benchmarks/results/languages.md):
    MiniLM's 0.40 would answer everything, so EMBEDDER=e5 defaults to 0.88/0.92."""
    assert (Settings().confidence_min, Settings().confidence_high) == (0.40, 0.65)
    e5 = Settings(embedder="e5")
    assert (e5.confidence_min, e5.confidence_high) == (0.88, 0.92)
    assert Settings(embedder="e5", confidence_min=0.5).confidence_min == 0.5  # set: it wins
    assert Settings(embedder="e5", confidence_min=0.5).confidence_high == 0.92
    monkeypatch.setenv("RAGLINE_EMBEDDER", "e5")
    monkeypatch.setenv("RAGLINE_CONFIDENCE_HIGH", "0.95")
    from_env = Settings()
    assert (from_env.confidence_min, from_env.confidence_high) == (0.88, 0.95)
    with pytest.raises(ValidationError, match=r"confidence_high \(0.7\).*0.88; embedder e5"):
        Settings(embedder="e5", confidence_high=0.7)
    monkeypatch.setenv("RAGLINE_EMBEDDER", "sentence-transformers")
    monkeypatch.setenv("RAGLINE_EMBED_MODEL", "some/model")
    monkeypatch.delenv("RAGLINE_CONFIDENCE_HIGH")
    assert Settings().confidence_min == 0.40  # other models: MiniLM's until calibrated


def test_auto_checks_one_confidence_bound_against_the_chosen_models_scale() -> None:
    """Under ``auto`` a lone bound is checked once the index's model is known: 0.87 is
    below e5's 0.92 (fine) but above MiniLM's 0.65 (the error names both)."""
    alone = Settings(embedder="auto", confidence_min=0.87)
    assert alone.confidence_min == 0.87
    e5 = alone.with_embedder("e5")
    assert (e5.confidence_min, e5.confidence_high) == (0.87, 0.92)
    with pytest.raises(ValueError, match=r"confidence_high \(0.65\).*0.87; embedder onnx"):
        alone.with_embedder("onnx")
    with pytest.raises(ValidationError, match=r"confidence_high \(0.5\)"):
        Settings(embedder="auto", confidence_min=0.6, confidence_high=0.5)  # both set: now


def test_the_sections_partition_the_settings() -> None:
    """Every setting sits in exactly one section, no section is empty, and ``Settings``
    holds the sections' fields and nothing else (a component typed with a section
    sees all of its group)."""
    owners: dict[str, list[str]] = {}
    for section in SECTIONS:
        assert section.model_fields, f"{section.__name__} has no settings"
        assert issubclass(Settings, section)
        for name in section.model_fields:
            owners.setdefault(name, []).append(section.__name__)
    assert {name: found for name, found in owners.items() if len(found) > 1} == {}
    assert set(owners) == set(Settings.model_fields)
    for section in SECTIONS:  # same field, same definition, in the section and in Settings
        for name, field in section.model_fields.items():
            assert repr(field) == repr(Settings.model_fields[name]), name


def test_a_section_checks_its_own_fields() -> None:
    """A section built alone validates like ``Settings`` (its cross-field checks move
    with it), and a ``Settings`` is accepted wherever the section is."""
    with pytest.raises(ValidationError, match="chunk_overlap_tokens must be smaller"):
        IngestSettings(chunk_overlap_tokens=600)
    with pytest.raises(ValidationError, match="generator 'openai' needs LLM_BASE_URL"):
        AnswerSettings(generator="openai")
    assert RetrieveSettings(boost_title=2.0).boosts.title == 2.0
    assert isinstance(Settings(), AnswerSettings)


def test_a_dotenv_file_is_read_under_the_environment_and_the_callers_values(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """settings/environment.py: the environment wins over `.env`, a value passed in
    over both; names match in any case; a list setting takes JSON; ``_env_file=None``
    reads no file."""
    (tmp_path / ".env").write_text(
        "RRF_K=11\n"
        "ragline_tenant=from-file\n"
        "export RETRIEVAL_TOP_K=7\n"
        'RAGLINE_EXTENSIONS=\'[".md", ".txt"]\'\n'
        "RAGLINE_NOT_A_SETTING=1\n"
        "# a comment\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGLINE_TENANT", "from-env")
    monkeypatch.setenv("rrf_k", "30")
    s = Settings()
    want = {"rrf_k": 30, "tenant": "from-env", "retrieval_top_k": 7, "extensions": (".md", ".txt")}
    assert {name: getattr(s, name) for name in want} == want
    assert set(want) <= s.model_fields_set
    # the environment wins whatever name each source uses
    monkeypatch.setenv("RAGLINE_RETRIEVAL_TOP_K", "9")
    assert Settings().retrieval_top_k == 9
    monkeypatch.delenv("RAGLINE_RETRIEVAL_TOP_K")
    # a prefixed name is not a field's name: passed in, it is ignored like any extra
    assert Settings(RAGLINE_TENANT="ignored").tenant == "from-env"
    s = Settings(rrf_k=40, tenant="passed")
    assert (s.rrf_k, s.tenant, s.retrieval_top_k) == (40, "passed", 7)
    s = Settings(_env_file=None)
    assert (s.rrf_k, s.tenant, s.retrieval_top_k, s.extensions) == (
        30,
        "from-env",
        Settings.model_fields["retrieval_top_k"].default,
        Settings.model_fields["extensions"].default,
    )


def test_a_list_setting_that_is_not_json_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGLINE_CORS_ALLOW_ORIGINS", "https://a.example")
    with pytest.raises(ValidationError, match="cors_allow_origins"):
        Settings(_env_file=None)
    monkeypatch.setenv("RAGLINE_CORS_ALLOW_ORIGINS", '["https://a.example"]')
    assert Settings(_env_file=None).cors_allow_origins == ("https://a.example",)


def test_every_setting_is_read_from_names_the_environment_reader_knows() -> None:
    """settings/environment.py reads a field's ``RAGLINE_`` name or its
    ``AliasChoices``; a plain alias or a path would not be read, so none is declared."""
    from ragline.settings.environment import env_names

    for name, field in Settings.model_fields.items():
        assert field.validation_alias is None or isinstance(field.validation_alias, AliasChoices)
        assert env_names(name, field), name
