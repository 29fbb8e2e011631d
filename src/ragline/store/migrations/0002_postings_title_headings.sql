-- The postings of terms in a title or heading, as their own (short) lists.
-- A common word rarely appears in titles, so its title/headings list is a small
-- part of its postings; MaxScore pruning (ragline/store/postgres_bm25.py) reads
-- only this list for a common term whose text matches cannot reach the top-k.
CREATE INDEX ragline_postings_term_th ON ragline_postings (term)
    INCLUDE (chunk_key, tf_title, tf_headings, tf_text, len_title, len_headings, len_text)
    WHERE tf_title > 0 OR tf_headings > 0;
