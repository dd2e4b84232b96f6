"""The indexer process: the catalog's only writer (``python -m indexer``).

Stages, one module each: ``scan`` (files and hashes) → ``build`` (conversion, in a
process pool for large batches) → ``plan`` (pure: names, ordinals, last-good, meta) →
``writer`` (the only tantivy IndexWriter). ``session`` wires them and keeps the state
between commits, ``watch`` feeds it file events, ``report`` talks to the operator.
``converted`` plans and writes tools already converted, without a spec directory: how
tests and benchmarks build their indexes. Nothing else outside this package imports it.
"""

__all__: list[str] = []
