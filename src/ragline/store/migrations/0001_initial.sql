-- ragline's PostgreSQL schema, version 1: chunks with their vectors, exact BM25
-- statistics, document records and index metadata. The HNSW index depends on
-- the model's dimension, so PostgresStore creates it (ragline_chunks_hnsw_<dim>).
-- pgvector itself is created before the migrations run (one per database).

CREATE TABLE ragline_meta (
    key   text PRIMARY KEY,
    value jsonb NOT NULL
);

CREATE TABLE ragline_documents (
    doc_id      text PRIMARY KEY,
    tenant      text NOT NULL,
    source      text NOT NULL,
    file_hash   text NOT NULL,
    chunk_count bigint NOT NULL,
    token_count bigint NOT NULL,
    chapter     text NOT NULL,
    title       text NOT NULL,
    format      text NOT NULL,
    ingested_at text NOT NULL
);
CREATE INDEX ragline_documents_tenant ON ragline_documents (tenant, source);

-- One row per chunk; ``key`` is the compact id the BM25 postings refer to.
-- ``embedding`` has no fixed dimension: the HNSW index is an expression index
-- on embedding::vector(<dim>) restricted to rows of that dimension.
CREATE TABLE ragline_chunks (
    key           bigint PRIMARY KEY,
    id            text NOT NULL UNIQUE,
    doc_id        text NOT NULL,
    tenant        text NOT NULL,
    source        text NOT NULL,
    title         text NOT NULL,
    chapter       text NOT NULL,
    section       text NOT NULL,
    heading_path  text[] NOT NULL,
    url           text NOT NULL,
    anchor        text NOT NULL,
    chunk_index   integer NOT NULL,
    start_char    bigint NOT NULL,
    end_char      bigint NOT NULL,
    token_count   integer NOT NULL,
    word_count    integer NOT NULL,
    has_code      boolean NOT NULL,
    has_equations boolean NOT NULL,
    content_hash  text NOT NULL,
    created_at    text NOT NULL,
    text          text NOT NULL,
    page          integer,
    metadata      jsonb NOT NULL DEFAULT '{}'::jsonb,
    len_title     integer NOT NULL,  -- BM25 field lengths in tokens
    len_headings  integer NOT NULL,
    len_text      integer NOT NULL,
    embedding     vector NOT NULL
);
-- Keep vectors in the row (compressed text moves out first): an exact scan must
-- not fetch every vector from the TOAST table (10× slower at 384 dimensions).
ALTER TABLE ragline_chunks ALTER COLUMN embedding SET STORAGE MAIN;
CREATE SEQUENCE ragline_chunk_key OWNED BY ragline_chunks.key;
CREATE INDEX ragline_chunks_doc ON ragline_chunks (doc_id, chunk_index);
CREATE INDEX ragline_chunks_tenant ON ragline_chunks (tenant);
CREATE INDEX ragline_chunks_chapter ON ragline_chunks (chapter);

-- BM25, exact: one posting per (term, chunk) with the term's frequency in each
-- field and the fields' lengths (so scoring never visits ragline_chunks).
CREATE TABLE ragline_postings (
    term         text NOT NULL,
    chunk_key    bigint NOT NULL,
    tf_title     integer NOT NULL,
    tf_headings  integer NOT NULL,
    tf_text      integer NOT NULL,
    len_title    integer NOT NULL,
    len_headings integer NOT NULL,
    len_text     integer NOT NULL
);
CREATE INDEX ragline_postings_term ON ragline_postings (term)
    INCLUDE (chunk_key, tf_title, tf_headings, tf_text, len_title, len_headings, len_text);
CREATE INDEX ragline_postings_chunk ON ragline_postings (chunk_key);

-- Document frequency of every term per field, kept in step with the postings
-- in the same transaction as every write.
CREATE TABLE ragline_terms (
    term        text PRIMARY KEY,
    df_title    integer NOT NULL,
    df_headings integer NOT NULL,
    df_text     integer NOT NULL
);

-- Corpus totals (one row): chunk count, per field the chunks whose field has a
-- token (BM25's N of that field) and the summed field lengths (→ avgdl).
CREATE TABLE ragline_corpus (
    id           boolean PRIMARY KEY DEFAULT true CHECK (id),
    chunks       bigint NOT NULL,
    n_title      bigint NOT NULL,
    n_headings   bigint NOT NULL,
    n_text       bigint NOT NULL,
    len_title    bigint NOT NULL,
    len_headings bigint NOT NULL,
    len_text     bigint NOT NULL
);
INSERT INTO ragline_corpus VALUES (true, 0, 0, 0, 0, 0, 0, 0);
