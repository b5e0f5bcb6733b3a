"""weft-search as a service: an HTTP API over one index, with versioned ranking profiles.

:func:`weftsearch.server.app.create_app` (needs the ``server`` extra: FastAPI,
uvicorn, prometheus-client) and :mod:`weftsearch.ranking.profiles` (no extra
needed). Nothing in the library imports this package, except the command
line's ``serve`` and ``eval --save-profile``.
"""
