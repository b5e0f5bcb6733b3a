"""Adapters that put weft-search behind other frameworks' interfaces.

Each integration is its own module with its own optional extra
(``weftsearch.integrations.langchain`` needs ``pip install 'weft-search[langchain]'``);
importing this package needs none of them. Integrations sit above the library:
they may import the engine, the scorers and the fusers, and nothing in the
library imports an integration (``tests/test_architecture.py`` enforces it).
"""

from __future__ import annotations

__all__: list[str] = []
