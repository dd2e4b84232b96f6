"""The demo: an orders API (``examples/backend.py``), its OpenAPI document and a config."""
