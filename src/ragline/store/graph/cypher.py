"""Every Cypher statement of the graph store, written once.

The statements keep to the part of Cypher that Neo4j 5 and FalkorDB share
(``MATCH``/``MERGE``/``UNWIND``/``WITH`` aggregation, ``$parameters``, ``DETACH
DELETE``, ``CASE``); what differs between the two engines is confined to the
``FALKOR_*`` statements below, and docs/graph.md lists each with its Neo4j 5 form.
Only FalkorDB is tested; Neo4j itself is not.

Model (seed 001)::

    (:Chunk)-[:NEXT_CHUNK]->(:Chunk)          consecutive chunks of a document
    (:Chunk)-[:BELONGS_TO]->(:Document)-[:BELONGS_TO]->(:Project)   project = tenant
    (:Chunk)-[:HAS_TERM {tf}]->(:Term {k, df})  BM25 postings, k = "<field>:<term>"
    (:Bm25 {id: 0, n0, t0, n1, t1, n2, t2})     per field: chunks with a token, total length

A ``Chunk`` node holds every Chunk field (``heading_path`` as a list, ``metadata``
as JSON text, nulls left out), ``headings`` (the joined heading path, for the
full-text index), ``len0..len2`` (token count of title, headings, text) and its
``embedding`` (vecf32).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragline.store.base import CHUNK_COLUMNS, DOCUMENT_COLUMNS
from ragline.store.filters import CHUNK_FILTER_FIELDS, to_sql_predicate
from ragline.store.graph.filters import chunk_where

#: The chunk's stored columns, in CHUNK_COLUMNS order (never the embedding: it is
#: big and most reads do not need it).
CHUNK_RETURN = ", ".join(f"c.{name}" for name in CHUNK_COLUMNS)
DOCUMENT_RETURN = ", ".join(f"d.{name}" for name in DOCUMENT_COLUMNS)

# --------------------------------------------------------------------- schema
# FalkorDB forms; Neo4j 5: CREATE VECTOR INDEX chunk_embedding IF NOT EXISTS FOR
# (c:Chunk) ON c.embedding OPTIONS {indexConfig: {`vector.dimensions`: …,
# `vector.similarity_function`: 'cosine'}} and CREATE FULLTEXT INDEX … (docs/graph.md).

FALKOR_VECTOR_INDEX = (
    "CREATE VECTOR INDEX FOR (c:Chunk) ON (c.embedding) OPTIONS "
    "{{dimension: {dimension}, similarityFunction: 'cosine', M: {m}, "
    "efConstruction: {ef_construction}, efRuntime: {ef}}}"
)
FALKOR_FULLTEXT_INDEX = (
    "CALL db.idx.fulltext.createNodeIndex("
    "{{label: 'Chunk', language: 'english', stopwords: []}}, "
    "{{field: 'title', weight: {title}}}, {{field: 'headings', weight: {headings}}}, "
    "{{field: 'text', weight: {text}}})"
)
RANGE_INDEXES = (
    "CREATE INDEX FOR (c:Chunk) ON (c.id)",
    "CREATE INDEX FOR (c:Chunk) ON (c.doc_id)",
    "CREATE INDEX FOR (c:Chunk) ON (c.tenant)",
    "CREATE INDEX FOR (c:Chunk) ON (c.chapter)",
    "CREATE INDEX FOR (d:Document) ON (d.doc_id)",
    "CREATE INDEX FOR (p:Project) ON (p.name)",
    "CREATE INDEX FOR (t:Term) ON (t.k)",
)
INIT_STATS = (
    "MERGE (s:Bm25 {id: 0}) ON CREATE SET s.n0 = 0, s.t0 = 0, s.n1 = 0, s.t1 = 0, "
    "s.n2 = 0, s.t2 = 0"
)

# --------------------------------------------------------------------- writes
# One replace or delete is a list of these run in one MULTI/EXEC transaction.

#: Take the chunks of $doc_ids out of the field statistics.
STATS_DROP = """
MATCH (s:Bm25 {id: 0})
OPTIONAL MATCH (c:Chunk) WHERE c.doc_id IN $doc_ids
WITH s,
     sum(CASE WHEN c.len0 > 0 THEN 1 ELSE 0 END) AS n0, sum(coalesce(c.len0, 0)) AS t0,
     sum(CASE WHEN c.len1 > 0 THEN 1 ELSE 0 END) AS n1, sum(coalesce(c.len1, 0)) AS t1,
     sum(CASE WHEN c.len2 > 0 THEN 1 ELSE 0 END) AS n2, sum(coalesce(c.len2, 0)) AS t2
SET s.n0 = s.n0 - n0, s.t0 = s.t0 - t0, s.n1 = s.n1 - n1, s.t1 = s.t1 - t1,
    s.n2 = s.n2 - n2, s.t2 = s.t2 - t2
"""
#: Take the chunks of $doc_ids out of their terms' document frequencies.
DF_DROP = """
MATCH (c:Chunk)-[:HAS_TERM]->(t:Term) WHERE c.doc_id IN $doc_ids
WITH t, count(c) AS n
SET t.df = t.df - n
"""
CHUNKS_DROP = "MATCH (c:Chunk) WHERE c.doc_id IN $doc_ids DETACH DELETE c"
DOCUMENTS_DROP = "MATCH (d:Document) WHERE d.doc_id IN $doc_ids DETACH DELETE d"
#: $terms: [{k, n}]: n new chunks hold term k.
DF_ADD = """
UNWIND $terms AS p
MERGE (t:Term {k: p.k}) ON CREATE SET t.df = 0
SET t.df = t.df + p.n
"""
#: $rows: [{props, v, terms: [[k, tf]]}]
CHUNKS_ADD = """
UNWIND $rows AS r
CREATE (c:Chunk)
SET c = r.props, c.embedding = vecf32(r.v)
WITH c, r
UNWIND r.terms AS p
MATCH (t:Term {k: p[0]})
CREATE (c)-[:HAS_TERM {tf: p[1]}]->(t)
"""
STATS_ADD = """
MATCH (s:Bm25 {id: 0})
SET s.n0 = s.n0 + $n[0], s.t0 = s.t0 + $t[0], s.n1 = s.n1 + $n[1], s.t1 = s.t1 + $t[1],
    s.n2 = s.n2 + $n[2], s.t2 = s.t2 + $t[2]
"""
#: $docs: [{props}] (every DocumentRecord field)
DOCUMENTS_ADD = """
UNWIND $docs AS r
MERGE (p:Project {name: r.tenant})
CREATE (d:Document)
SET d = r
CREATE (d)-[:BELONGS_TO]->(p)
"""
CHUNKS_LINK = """
MATCH (c:Chunk) WHERE c.doc_id IN $doc_ids
MATCH (d:Document {doc_id: c.doc_id})
CREATE (c)-[:BELONGS_TO]->(d)
"""
#: $pairs: [[chunk id, next chunk id]]
NEXT_LINK = """
UNWIND $pairs AS p
MATCH (a:Chunk {id: p[0]}), (b:Chunk {id: p[1]})
CREATE (a)-[:NEXT_CHUNK]->(b)
"""
TERMS_PRUNE = "MATCH (t:Term) WHERE t.df <= 0 DETACH DELETE t"

# ---------------------------------------------------------------------- reads

DOCUMENTS = f"MATCH (d:Document) /*WHERE*/ RETURN {DOCUMENT_RETURN} ORDER BY d.doc_id"
COUNT = "MATCH (c:Chunk) /*WHERE*/ RETURN count(c)"
CHUNKS_BY_ID_WITH_VECTOR = f"MATCH (c:Chunk) WHERE c.id IN $ids RETURN {CHUNK_RETURN}, c.embedding"
CHUNKS_BY_INDEX = (
    "MATCH (c:Chunk) WHERE c.doc_id = $doc_id "
    "AND ($indices IS NULL OR c.chunk_index IN $indices) "
    f"RETURN {CHUNK_RETURN} ORDER BY c.chunk_index"
)
#: Keyset pagination by id (range index), so a full scan costs O(N) in all.
CHUNKS_PAGE = (
    f"MATCH (c:Chunk) WHERE c.id > $after RETURN {CHUNK_RETURN}, c.embedding "
    "ORDER BY c.id LIMIT $limit"
)
#: BM25 statistics: per field (n, total length) and the df of each query term key.
BM25_STATS = """
MATCH (s:Bm25 {id: 0})
OPTIONAL MATCH (t:Term) WHERE t.k IN $keys
RETURN s.n0, s.t0, s.n1, s.t1, s.n2, s.t2, collect([t.k, t.df])
"""
#: $q: [{k, f, w, a, b, boost}] with w = count·idf·(k1+1), a = k1·(1−b), b = k1·b/avgdl:
#: per chunk and field Σ w·tf/(tf + a + b·dl), then the best boosted field. The WITHs
#: keep the planner starting from the Term index: with the filter next to the MATCH,
#: FalkorDB scanned the filtered chunks and their edges instead (10 s vs 20 ms a
#: query on SciFact's 9k chunks).
BM25_SEARCH = """
UNWIND $q AS q
MATCH (t:Term {k: q.k})
WITH q, t
MATCH (t)<-[h:HAS_TERM]-(c:Chunk)
WITH q, h, c
/*WHERE*/
WITH c, q.f AS f, max(q.boost) AS boost,
     sum(q.w * h.tf / (h.tf + q.a + q.b *
         (CASE q.f WHEN 0 THEN c.len0 WHEN 1 THEN c.len1 ELSE c.len2 END))) AS s
WITH c, max(boost * s) AS score
WHERE score > 0
RETURN c.id, score ORDER BY score DESC, c.id LIMIT $k
"""
#: Approximate search in the vector index; FalkorDB's score is the cosine distance.
#: Neo4j 5: CALL db.index.vector.queryNodes('chunk_embedding', $n, $v) (similarity).
FALKOR_VECTOR_SEARCH = """
CALL db.idx.vector.queryNodes('Chunk', 'embedding', $n, vecf32($v)) YIELD node, score
WITH node AS c, score
/*WHERE*/
RETURN c.id AS hit, 1.0 - score AS sim /*ROWS*/ ORDER BY sim DESC, hit LIMIT $k
"""
#: Exact search over the chunks a filter leaves (when the index's oversampled
#: candidates hold fewer than k of them). Neo4j 5: vector.similarity.cosine().
FALKOR_VECTOR_EXACT = """
MATCH (c:Chunk)
/*WHERE*/
WITH c, 1.0 - vec.cosineDistance(c.embedding, vecf32($v)) AS sim
RETURN c.id AS hit, sim /*ROWS*/ ORDER BY sim DESC, hit LIMIT $k
"""
#: Graph expansion of the hits $ids in one query: the chunks NEXT_CHUNK reaches
#: within /*WINDOW*/ steps (a variable-length bound cannot be a parameter) and, when
#: $section, the chunks of the parent document that share the hit's section within
#: $span positions (Chunk→Document←Chunk).
EXPAND = f"""
UNWIND $ids AS hid
MATCH (h:Chunk {{id: hid}})-[:BELONGS_TO]->(d:Document)
OPTIONAL MATCH (h)-[:NEXT_CHUNK*1../*WINDOW*/]-(n:Chunk)
WITH hid, h, d, collect(DISTINCT n) AS near
OPTIONAL MATCH (s:Chunk)-[:BELONGS_TO]->(d)
WHERE $section AND s.section = h.section AND s.id <> h.id
  AND abs(s.chunk_index - h.chunk_index) <= $span
WITH hid, near, collect(DISTINCT s) AS same
UNWIND near + same AS c
WITH DISTINCT hid, c
RETURN hid, {CHUNK_RETURN}
"""


def fill(template: str, where: str = "", rows: str = "", window: int = 1) -> str:
    """A template with its ``WHERE`` clause, extra returned columns and window."""
    return (
        template.replace("/*WHERE*/", where)
        .replace("/*ROWS*/", rows)
        .replace("/*WINDOW*/", str(int(window)))
    )


def where_clause(
    filters: Mapping[str, Any] | None,
    var: str = "c",
    fields: Mapping[str, type] = CHUNK_FILTER_FIELDS,
    extra: str = "",
) -> tuple[str, dict[str, Any]]:
    """``WHERE var.field = $f_field AND …`` with its parameters (names and value
    types checked like the SQL filters; values only ever travel as parameters)."""
    if fields is CHUNK_FILTER_FIELDS:  # the full syntax (ragline.store.graph.filters)
        tests, params = chunk_where(filters, var)
    else:
        if filters:
            to_sql_predicate(dict(filters), fields)  # ValueError naming a bad field
        params = {f"f_{name}": value for name, value in sorted((filters or {}).items())}
        tests = [f"{var}.{name} = $f_{name}" for name in sorted(filters or {})]
    if extra:
        tests.append(extra)
    return ("WHERE " + " AND ".join(tests) if tests else ""), params
