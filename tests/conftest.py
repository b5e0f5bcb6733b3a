"""Test-run settings shared by every test package.

Hypothesis profiles: the default run draws fresh examples each time (so local runs keep finding new
cases); ``HYPOTHESIS_PROFILE=ci`` derandomises the draw, so the run that decides whether a change lands
is repeatable: a failure CI reports reproduces on the next run, and a pass is not luck. Every case a
random run has found is pinned with ``@example`` in its test, so CI checks it too.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("default", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
