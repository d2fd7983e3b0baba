"""kvoffload.impl: the reference offloading manager (torch-free) and its vLLM facade.

``OffloadManager`` implements the native API (``docs/native-api.md``) exactly as the
spec decides; :mod:`.vllm_facade` wraps it in vLLM's method names and output shapes.
Nothing here imports torch: the manager runs in the scheduler process and in the
conformance suite without it.
"""

from .errors import UnknownPolicy
from .manager import ManagerView, OffloadManager, policy_of

__all__ = ["ManagerView", "OffloadManager", "UnknownPolicy", "policy_of"]
