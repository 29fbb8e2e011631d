"""Measuring ragline on public data: BEIR-layout retrieval runs and answer checks.

``beir`` loads a dataset folder, ``index`` ingests its corpus into a throw-away
(cached) index through the real chunker, embedder and store, ``runs`` searches
it in every retrieval mode and scores the rankings with ir-measures, ``answers``
checks cited answers against SciFact's sentence-level evidence, and ``report``
renders the results as a terminal table, JSON or Markdown. ``bench``,
``synthetic`` and ``machine`` measure speed and scale (``ragline bench``).
"""
