-- BM25 postings packed per term (store/postgres/bm25.py): each term's postings
-- as one bytea of 32-byte records (chunk key, tf and length per field, in
-- PostgreSQL's binary send format), written by optimize() for the chunks up to
-- a watermark (ragline_meta 'packed_postings'). A query reads a term's packed
-- list in one value plus the rows of newer chunks; packed postings of chunks
-- deleted since are never returned (the chunk lookup of the final hits drops
-- them). EXTERNAL: stored uncompressed, so a read is a plain copy.
CREATE TABLE ragline_term_postings (
    term     text PRIMARY KEY,
    postings bytea NOT NULL
);
ALTER TABLE ragline_term_postings ALTER COLUMN postings SET STORAGE EXTERNAL;

-- Postings by (term, chunk key): a term's rows newer than the watermark are a
-- range of this index; it also serves every whole-list read the term index did.
CREATE INDEX ragline_postings_term_key ON ragline_postings (term, chunk_key)
    INCLUDE (tf_title, tf_headings, tf_text, len_title, len_headings, len_text);
DROP INDEX ragline_postings_term;
