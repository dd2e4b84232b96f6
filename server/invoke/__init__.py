"""invoke_tool, from the caller's arguments to the backend's answer.

The pure steps come first and do no I/O (docs/conventions.md §2.5, build then send):
``arguments.py`` checks the version pin and the arguments, ``request.py`` builds the
backend request (``encoding.py`` writes each parameter by its style, ``body.py`` the
body), ``answer.py`` turns the backend's answer into the tool's result. Then I/O:
``sender.py`` sends a request to its backend (origins, redirects, per-caller slots,
failures as tool errors) over ``server/outbound/``'s HTTP/1.1 client and TLS
contexts; ``invoker.py`` runs the steps in order for one call and writes its audit line.
"""
