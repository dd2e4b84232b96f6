"""What the gateway sends out over HTTP: to backends (``server/invoke/``), to authorization
servers (``server/exchange.py``) and for keys and introspection
(``server/identity/resource_server.py``).

``http_client.py`` is the HTTP/1.1 client, one keep-alive pool per origin; ``tls.py`` builds
the TLS contexts a spec's config names; ``wire.py`` is what crosses the client's edge,
free of I/O. Nothing here imports the packages that use it.
"""
