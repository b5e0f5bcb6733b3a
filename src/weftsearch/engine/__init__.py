"""The engine's types: documents, queries, streams, snapshots, the index and search.

Scorers and fusers depend on these types; nothing here imports a scorer or a
fuser. Import the names from :mod:`weftsearch` rather than from here.
"""
