"""kvoffload.impl.datapath: the torch data path (host block pool, transfers, tier).

Needs torch; ``kvoffload.impl`` itself (the manager) does not import this package.
See ``docs/datapath.md``.

* :class:`HostBlockPool`: ``num_blocks`` KV blocks in (pinned, with CUDA) host memory.
* Transfer engines (:class:`TransferEngine`): :class:`DeterministicEngine` for tests,
  :class:`ThreadedEngine` (concurrent CPU copies, failure injection), and
  ``kvoffload.impl.datapath.cuda.CudaEngine`` (imported on demand).
* :class:`OffloadTier`: the manager, the pool and an engine together.
"""

from .copyplan import POISON
from .deterministic import DeterministicEngine
from .engine import TransferEngine
from .errors import BadBlockIds, BusyBlock, EngineClosed, LayoutMismatch, UnknownJob
from .failures import FailureInjector, fail_jobs, fail_randomly, never
from .jobs import Job, JobResult
from .layout import BlockLayout, layout_of
from .pool import HostBlockPool
from .threaded import ThreadedEngine
from .tier import Finished, LoadTicket, OffloadTier, StoreTicket, open_tier

__all__ = [
    "POISON", "BadBlockIds", "BlockLayout", "BusyBlock", "DeterministicEngine",
    "EngineClosed", "FailureInjector", "Finished", "HostBlockPool", "Job", "JobResult",
    "LayoutMismatch", "LoadTicket", "OffloadTier", "StoreTicket", "ThreadedEngine",
    "TransferEngine", "UnknownJob", "fail_jobs", "fail_randomly", "layout_of", "never",
    "open_tier",
]
