"""Whether one program's compilation found the compilation cache warm or cold.

A run's processes share one compilation cache (:func:`sidebyside.lab.conditions.use_compile_cache`),
and a device call's posts share it too, so "cold" is a property of each program, not of a process or a
folder. :func:`snapshot` reads each framework's own cache counters (JAX's monitoring events for its
persistent cache; Inductor's FX-graph cache counters) and :func:`state` says what happened between two
snapshots: ``"warm"`` (every compilation read back), ``"cold"`` (at least one compiled afresh) or None
(no cached compilation happened: eager code, or a program already in memory).

Importing this module imports neither framework; :func:`snapshot` reads only those already imported.
"""

from __future__ import annotations

import sys
from collections import Counter

__all__ = ["snapshot", "state"]

_JAX: Counter = Counter()
_LISTENING = False
#: JAX's monitoring events of its persistent compilation cache, by what they count.
_JAX_EVENTS = {"/jax/compilation_cache/cache_hits": "hit", "/jax/compilation_cache/cache_misses": "miss"}


def _listen() -> None:
    global _LISTENING
    if _LISTENING or "jax" not in sys.modules:
        return
    import jax

    def on_event(event: str, **_: object) -> None:
        if event in _JAX_EVENTS:
            _JAX[_JAX_EVENTS[event]] += 1

    jax.monitoring.register_event_listener(on_event)
    _LISTENING = True


def snapshot() -> tuple[int, int]:
    """Cache hits and misses so far in this process, both frameworks together."""
    _listen()
    hits, misses = _JAX["hit"], _JAX["miss"]
    if "torch._dynamo" in sys.modules:
        inductor = sys.modules["torch._dynamo"].utils.counters["inductor"]
        hits += inductor.get("fxgraph_cache_hit", 0)
        misses += inductor.get("fxgraph_cache_miss", 0)
    return hits, misses


def state(before: tuple[int, int], after: tuple[int, int]) -> str | None:
    """``"cold"``, ``"warm"`` or None for what compiled between two :func:`snapshot` readings."""
    hits, misses = after[0] - before[0], after[1] - before[1]
    return "cold" if misses > 0 else "warm" if hits > 0 else None
