"""The API's routes by area, each a FastAPI ``APIRouter`` that ``create_app`` includes.

:mod:`.search` (search, batch search), :mod:`.documents` (get, upsert,
delete, commit), :mod:`.operations` (stats, health, metrics, the explorer
page), :mod:`.profiles` (ranking profiles), :mod:`.evaluate` (compare,
rank_eval). Each route reaches the application's
:class:`~weftsearch.server.state.ServerState` through the
:data:`~weftsearch.server.state.Served` dependency.
"""
