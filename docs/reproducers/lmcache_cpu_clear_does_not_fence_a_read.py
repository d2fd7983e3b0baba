"""LMCache: 'lookup' diverges from the kvoffload spec, in its own API.

Found by `kvoffload check lmcache==0.5.6`: lookup answers MISS iff absent, PENDING iff its store is in flight, HIT iff READY (safe profile: PENDING may read as MISS, never as HIT); vLLM's RETRY only where the spec says PENDING.
lookup('a') must answer MISS (safe profile); the target answered HIT

The operations of the spec's API, as kvoffload made them (tier of 1):
    1. prepare_store(['a'])
    2. complete_store(['a'])
    3. prepare_load(['a'])
    4. reset_cache()
    5. lookup('a')

Below, each operation (``step``) is followed by exactly the LMCache calls kvoffload's
adapter made for it, and each call's answer is compared with the answer LMCache gave
under kvoffload. Run it with plain `python` (no kvoffload needed). It prints every call
and answer, then the divergent operation's calls next to what the spec demands. Exit
status 1: LMCache answered every call as under kvoffload, so the divergence is its own;
0: some answer differs (not reproduced outside kvoffload).

"""

# --- the reproducer's helpers (copied into every script from here on) ---
import dataclasses
import enum
import linecache
import sys
from typing import Any

NAMED: dict[str, Any] = {}
"""Objects the script named (keys, buffers), by name: an answer holding one is written
as its name."""
SAME = [0]
"""How many answers were the same as under kvoffload."""
OTHER: list[tuple[str, Any, Any]] = []
"""The answers that were not: (line, answer, answer under kvoffload)."""
STEPS: list[tuple[str, list[tuple[str, Any]]]] = []


def plain(value: Any, named: dict[str, Any] | None = None) -> Any:
    """An answer in a form that compares across processes: literals as they are,
    sequences item by item, dataclasses field by field, named objects by name, any
    other object by its type."""
    named = NAMED if named is None else named
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    for name, known in named.items():
        try:
            if value is known or (type(value) is type(known) and bool(value == known)
                                  and type(value).__module__ != "builtins"):
                return "<" + name + ">"
        except Exception:
            continue
    if isinstance(value, enum.Enum):
        return "<" + type(value).__name__ + "." + value.name + ">"
    if isinstance(value, (list, tuple)):
        return [plain(item, named) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain(item, named) for item in value), key=repr)
    if isinstance(value, dict):
        return [[plain(k, named), plain(v, named)] for k, v in value.items()]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__name__,
                **{f.name: plain(getattr(value, f.name), named)
                   for f in dataclasses.fields(value)}}
    if callable(getattr(value, "tolist", None)):
        return plain(value.tolist(), named)
    return "<" + type(value).__name__ + ">"


def _note(line: str, got: Any, expected: Any) -> None:
    same = got == expected
    SAME[0] += same
    if not same:
        OTHER.append((line, got, expected))
    if STEPS:
        STEPS[-1][1].append((line, got))
    print("    " + line + "\n        -> " + repr(got)
          + ("" if same else "   (under kvoffload: " + repr(expected) + ")"))


def saw(value: Any, expected: Any, name: str | None = None) -> None:
    """The answer of the call on the line above, printed and compared with ``expected``
    (what the engine answered under kvoffload); ``name``: the script names it so."""
    frame = sys._getframe(1)
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno - 1).strip()
    _note(line, plain(value), expected)
    if name is not None:
        NAMED[name] = value


def made(value: Any, name: str) -> Any:
    """An object the script makes (a key, a backend), named so in the answers."""
    NAMED[name] = value
    return value


def raises(expected: str | None) -> "_Raises":
    """The call in this ``with`` raises (``expected``: its class's name, or None)."""
    return _Raises(expected)


class _Raises:

    def __init__(self, expected: str | None) -> None:
        self.expected = expected

    def __enter__(self) -> "_Raises":
        frame = sys._getframe(1)
        self.line = linecache.getline(frame.f_code.co_filename, frame.f_lineno + 1).strip()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: Any) -> bool:
        got = None if kind is None else "raises " + kind.__name__
        _note(self.line, got, None if self.expected is None else "raises " + self.expected)
        return kind is not None and issubclass(kind, Exception)


def step(text: str) -> None:
    """One operation of the spec's API, made on the engine by the calls after it."""
    STEPS.append((text, []))
    print(text)


def finish(failing: str, spec_table: str, what: str) -> int:
    """Print the divergent operation's calls beside the spec's demand; the exit status."""
    print()
    same = not OTHER
    calls = [answers for text, answers in STEPS if text.split(". ", 1)[-1] == failing]
    print("the divergence, at " + failing + ":")
    for line, got in (calls[-1] if calls else []):
        print("    " + line + "  -> " + repr(got))
    print("what the spec demands, next to what " + what + " showed under kvoffload:")
    print(spec_table)
    if same:
        print("REPRODUCED: every call answered as it did under kvoffload ("
              + str(SAME[0]) + " answers): " + what + " diverges from the spec here")
        return 1
    print("NOT REPRODUCED: " + str(len(OTHER)) + " answer(s) differ from those under "
          "kvoffload; the first: " + OTHER[0][0] + " -> " + repr(OTHER[0][1]))
    return 0





from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.pin_monitor import PinMonitor
from lmcache.v1.memory_allocators.host_memory_allocator import HostMemoryAllocator
from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend
from lmcache.utils import CacheEngineKey
import torch

SPEC = "                   spec         target\n-----------------  -----------  -----------\ncall               lookup('a')  lookup('a')\nanswer             MISS         HIT\nspec state of 'a'  ABSENT"


def main():
    config = made(LMCacheEngineConfig.from_defaults(chunk_size=16, cache_policy='LRU', local_cpu=True, max_local_cpu_size=3.814697265625e-06), 'config')
    v1 = made(PinMonitor.GetOrCreate(config), 'v1')
    allocator = made(HostMemoryAllocator(4096), 'allocator')
    backend = made(LocalCPUBackend(config, memory_allocator=allocator), 'backend')
    step("1. prepare_store(['a'])")
    key_a = made(CacheEngineKey(model_name='kvoffload', world_size=1, worker_id=0, chunk_hash=1, dtype=torch.uint8), 'key_a')
    answer = backend.contains(key_a)
    saw(answer, False)
    answer = backend.exists_in_put_tasks(key_a)
    saw(answer, False)
    v2 = backend.get_keys()
    saw(v2, [], 'v2')
    v3 = backend.allocate(torch.Size([2, 1, 16, 128]), torch.uint8, busy_loop=False)
    saw(v3, '<TensorMemoryObj>', 'v3')
    v4 = backend.get_keys()
    saw(v4, [], 'v4')
    step("2. complete_store(['a'])")
    answer = backend.submit_put_task(key_a, v3)
    saw(answer, None)
    answer = v3.ref_count_down()
    saw(answer, None)
    step("3. prepare_load(['a'])")
    answer = backend.contains(key_a)
    saw(answer, True)
    v5 = backend.get_blocking(key_a)
    saw(v5, '<v3>', 'v5')
    step('4. reset_cache()')
    answer = backend.clear()
    saw(answer, 0)
    step("5. lookup('a')")
    answer = backend.contains(key_a)
    saw(answer, True)
    return finish("lookup('a')", SPEC, 'LMCache')


if __name__ == "__main__":
    try:
        status = main()
    except Exception:
        import traceback

        traceback.print_exc()
        print("the script failed before it could compare the answers")
        status = 2
    sys.exit(status)
