"""A tiny engine for the engine-native reproducer's tests: its source, from the marker
on, is carried into the scripts (so a fresh process needs nothing but the standard
library), as LMCache's harness is."""

# --- the fake engine (carried into the scripts from here on) ---
import os


class Shelf:
    """Holds named items; ``has`` says whether one is there."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: dict[str, bytes] = {}

    def put(self, name: str, data: bytes) -> bool:
        if len(self.items) >= self.size:
            return False
        self.items[name] = data
        return True

    def has(self, name: str) -> bool:
        return name in self.items

    def has_under_kvoffload(self, name: str) -> bool:
        """Answers by the environment: True only where PYTHONPATH is set (as in the
        suite's host), so the fresh process of a reproducer sees another answer."""
        return name in self.items and "PYTHONPATH" in os.environ

    def take(self, name: str) -> bytes:
        return self.items.pop(name)
