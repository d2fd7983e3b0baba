"""Run the spec's :class:`~kvoffload.spec.calls.Call` records on an ``OffloadManager``.

The tests replay scenario vectors and random call sequences on the manager through
this one dispatcher, so every test drives the manager the same way.
"""

from __future__ import annotations

from kvoffload.impl import OffloadManager
from kvoffload.spec.calls import Call, Op, Output


def run_call(manager: OffloadManager, call: Call) -> Output:
    """Run ``call`` on ``manager`` and return its output (misuse errors propagate)."""
    op = call.op
    if op is Op.LOOKUP:
        return manager.lookup(call.keys[0])
    if op is Op.PREPARE_LOAD:
        return manager.prepare_load(call.keys)
    if op is Op.COMPLETE_LOAD:
        return manager.complete_load(call.keys, call.epoch)
    if op is Op.TOUCH:
        return manager.touch(call.keys)
    if op is Op.PREPARE_STORE:
        return manager.prepare_store(call.keys)
    if op is Op.COMPLETE_STORE:
        return manager.complete_store(call.keys, call.success, call.epoch)
    if op is Op.RESET_CACHE:
        return manager.reset_cache()
    return manager.take_events()
