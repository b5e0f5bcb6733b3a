"""``python -m weftsearch.cli``: the ``weft-search`` command."""

from weftsearch.cli import main

raise SystemExit(main())
