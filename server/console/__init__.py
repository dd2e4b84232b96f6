"""The operator console: server-rendered pages at ``/console`` (``[console] enabled``).

Read-only views of what the server holds: the loaded catalog (``overview.py``,
``catalog.py``, ``tool.py``), a search as a chosen caller gets it with the evidence
behind its ranking (``playground.py``, through ``ranking.py``, the one module that
knows the explain code), and the recent traffic (``traffic.py``). Each page's data is a
Struct built by its module; ``routes.py`` wires them to URLs behind the operator token
(``auth.py``) and renders them with the Jinja2 templates under ``templates/``.

Nothing here is imported unless the console is enabled (``server/app.py``); this file
imports nothing, so importing a submodule loads only what that one needs.
"""
