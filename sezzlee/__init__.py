"""The ``sezzlee`` command: one entry point over the indexer, the server and the model.

The only package that imports both ``indexer`` and ``server`` (``tests/test_layers.py``):
it dispatches to their own command lines and, for local MCP clients, runs both behind
stdin and stdout (``sezzlee/stdio.py``).
"""
