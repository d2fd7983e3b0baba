"""Errors of the data path: misuse of the pool, the engines or the tier.

Every one is a :class:`~kvoffload.spec.errors.MisuseError` (a ``ValueError`` with a
stable ``code``): the call that raises it has changed nothing.
"""

from __future__ import annotations

from kvoffload.spec.errors import MisuseError


class LayoutMismatch(MisuseError):
    """Two tensors that must hold blocks of one layout (shape and dtype) do not."""

    code = "layout-mismatch"


class BadBlockIds(MisuseError):
    """A copy names a block outside its tensor, a key list and a block list of different
    lengths, or one destination block twice."""

    code = "bad-block-ids"


class BusyBlock(MisuseError):
    """A copy would write a block that a running copy reads or writes, or read a block
    that a running copy writes."""

    code = "busy-block"


class UnknownJob(MisuseError):
    """A job id that this engine did not hand out, or whose copy has already ended."""

    code = "unknown-job"


class EngineClosed(MisuseError):
    """A copy was submitted to an engine after :meth:`close`."""

    code = "engine-closed"
