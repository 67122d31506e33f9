"""Waiting for what a server does in the background (a relay's delivery, a webhook's attempt)."""

import time


def eventually(probe, timeout=30.0, every=0.1):
    """probe() until it returns something truthy; its last value is shown when time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout} s; last: {value!r}")
        time.sleep(every)
