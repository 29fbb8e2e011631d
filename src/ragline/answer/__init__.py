"""Answering: context assembly, generators, citations, confidence and fallback.

:class:`~ragline.answer.answerer.Answerer` runs the pipeline;
``Ragline.ask`` / ``Ragline.ask_stream`` wire it to an index.
"""
