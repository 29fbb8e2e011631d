-- BM25 packed postings split into parts by impact (store/postgres/bm25.py):
-- a term's postings in a title or heading (part 0), its text-only postings with
-- tf > 1 (part 1) and with tf = 1 (part 2), each part with the largest tf and
-- the smallest length per field of its postings, so a query bounds what a part
-- can add to any chunk's score and skips scoring the parts that cannot lift a
-- chunk into the top-k (MaxScore). The packed lists are derived from
-- ragline_postings: they are dropped here, queries read every posting from the
-- rows (exact, slower) until the next optimize() packs them again, in parts.
TRUNCATE ragline_term_postings;
DELETE FROM ragline_meta WHERE key = 'packed_postings';
ALTER TABLE ragline_term_postings DROP CONSTRAINT ragline_term_postings_pkey;
-- No defaults (the table is empty here): a process that still packs in the 0003
-- format (term, postings) must fail, not store a whole list as a part whose
-- bounds say it adds nothing, which pruning would then skip.
ALTER TABLE ragline_term_postings
    ADD COLUMN part smallint NOT NULL,
    ADD COLUMN max_tf int[] NOT NULL,
    ADD COLUMN min_len int[] NOT NULL;
ALTER TABLE ragline_term_postings ADD PRIMARY KEY (term, part);
