"""The indexer process: the catalog's only writer (``python -m indexer``).

Stages, one module each: ``scan`` (files and hashes) → ``build`` (conversion, in a
process pool for large batches) → ``plan`` (pure: names, ordinals, last-good, meta) →
``writer`` (the only tantivy IndexWriter). ``session`` wires them and keeps the state
between commits, ``watch`` feeds it file events, ``report`` talks to the operator.
Nothing outside this package imports it.
"""

__all__: list[str] = []
