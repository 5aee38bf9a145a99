"""What the API process does once at start-up, after its models load."""

from __future__ import annotations

import gc
import threading
import time


def test_startup_objects_leave_the_collectors_generations(app):
    """Once the models-warmup thread ends, what start-up made is frozen (``gc.freeze``): a
    full collection no longer walks the model libraries' objects."""
    deadline = time.monotonic() + 120
    while any(t.name == "models-warmup" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "models-warmup did not end"
        time.sleep(0.1)
    assert gc.get_freeze_count() > 10_000  # modules, the app and the models, not a handful
