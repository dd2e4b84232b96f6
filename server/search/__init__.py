"""search_tools' pipeline, one module per step (``pipeline.py`` reads them in order).

Imports point one way: ``pipeline`` → the steps → ``catalog`` and the view
(``server/view.py``: the snapshot and its caches); the view never imports this package
(``tests/test_layers.py``).
"""
