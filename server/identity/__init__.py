"""Who is calling: the MCP request's headers and the config → a caller identity.

``caller.py`` reads one request's headers into a ``Caller`` (the theory of operation is
there); ``credentials.py`` says where each security scheme's credential is read from and
sent to; ``plans.py`` is the per-catalog plan every request shares (which documents
receive caller headers, visibility per namespace); ``jwt_verifier.py`` checks bearer
JWTs; ``resource_server.py`` is the gateway as an OAuth 2.1 resource server (the tokens
``[auth]`` accepts, the metadata it publishes); ``secrets.py`` resolves the environment
variables and key files the config names, once, at start-up.
"""
