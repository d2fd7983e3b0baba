"""kvoffload.conformance: check any engine's offloading manager against the spec.

From the command line: ``kvoffload check TARGET``; from pytest:
``pytest --kvoffload-target=TARGET``; from Python::

    from kvoffload.conformance import check
    result = check("mypkg.offload:Manager", assume=["unique-keys"])
    result.raise_if_failed()      # PropertyViolation with the shrunk trace

Names are imported on first use, so importing this package (a reproducer does) pulls
in neither Hypothesis nor any target.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.abc import Loader

    from .command.runner import CheckResult
    from .errors import PropertyViolation, UsageError

__all__ = ["CheckResult", "PropertyViolation", "UsageError", "check"]


def check(
    target: Any,
    *,
    adapter: str = "auto",
    profile: str = "strict",
    policy: str = "lru",
    level: str = "any",
    eviction: str | None = None,
    fault: str = "none",
    assume: Iterable[str] = (),
    max_keys_per_call: int | None = None,
    capacity: int = 64,
    trace: str | None = None,
    max_examples: int = 300,
    steps: int = 150,
    seed: int | None = None,
    call_timeout: float = 10.0,
    stop_at_first: bool = False,
    database: str | None = None,
) -> CheckResult:
    """Check ``target`` (a TARGET string, or a manager class or factory) against the spec.

    The keywords are the suite's options as ``check()`` takes them: the table in
    :mod:`kvoffload.conformance.options` (and docs/conformance.md, made from it) says
    what each means; a test keeps this signature equal to it. ``max_keys_per_call=None``
    is the kind of target's default (1 for ``lmcache==``, else no limit), and so is
    ``eviction=None`` (``background`` for ``mooncake==``, else ``on-store``); ``database``:
    a folder for Hypothesis's example database (a failure found once replays first next
    time), None (the default) keeps none.

    raises: UsageError (bad option, unloadable target, no adapter fits)
    """
    given = {name: value for name, value in locals().items() if name != "target"}
    from .command.runner import run_check
    from .config import CheckConfig
    from .options import FrontEnd, parse_options
    from .target.targets import absolute_target

    config = CheckConfig.from_values(parse_options(given, FrontEnd.CHECK))
    if isinstance(target, str):
        return run_check(absolute_target(target), config)
    name = f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', target)}"
    return run_check(name, config, obj=target)


def __getattr__(name: str) -> Any:
    if name in ("PropertyViolation", "UsageError"):
        from . import errors

        return getattr(errors, name)
    if name == "CheckResult":
        from .command.runner import CheckResult

        return CheckResult
    raise AttributeError(f"module 'kvoffload.conformance' has no attribute {name!r}")


# --- The flat layout's names (issue 22's layout, docs/architecture.md) ----------------------------

_MOVED = {
    "check_command": "command.check_command",
    "compare": "judge.compare",
    "corpus_command": "corpus.corpus_command",
    "corpus_replay": "corpus.corpus_replay",
    "corpus_write": "corpus.corpus_write",
    "engine_prelude": "target.engine_prelude",
    "engine_record": "target.engine_record",
    "engine_script": "command.engine_script",
    "examples_db": "command.examples_db",
    "explain": "judge.explain",
    "generator": "judge.generator",
    "guard": "judge.guard",
    "host": "target.host",
    "isolation": "target.isolation",
    "lmcache_adapters": "target.lmcache_adapters",
    "lmcache_harness": "target.lmcache_harness",
    "lmcache_loader": "target.lmcache_loader",
    "lockstep": "judge.lockstep",
    "machine": "judge.machine",
    "mooncake_adapter": "target.mooncake_adapter",
    "mooncake_cluster": "target.mooncake_cluster",
    "mutants": "selftest.mutants",
    "native": "target.native",
    "progress": "command.progress",
    "properties": "judge.properties",
    "protocol": "target.protocol",
    "remote": "target.remote",
    "report": "command.report",
    "runner": "command.runner",
    "selftest_report": "selftest.selftest_report",
    "shrink": "judge.shrink",
    "targets": "target.targets",
    "vllm_adapters": "target.vllm_adapters",
    "vllm_stubs": "target.vllm_stubs",
    "vllm_wheels": "target.vllm_wheels",
}
"""Old name -> new, relative to this package, of every module the layout moved."""


class _MovedModules:
    """``kvoffload.conformance.runner`` imports as ``kvoffload.conformance.command.runner``
    (the same module object): reproducers, targets, scripts and TARGET strings written
    against the flat layout keep working. ``python -m`` needs the new names.

    A meta path finder by its ``find_spec`` alone: :mod:`importlib.abc` (whose import
    brings in :mod:`importlib.resources`, :mod:`pathlib`, :mod:`tempfile` and theirs) is
    imported only when an old name is, not by every process that imports this package
    (each Python host does)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        moved = _MOVED.get(fullname.removeprefix(__name__ + "."))
        if moved is None or not fullname.startswith(__name__ + "."):
            return None
        return importlib.util.spec_from_loader(fullname, _alias(f"{__name__}.{moved}"))


def _alias(name: str) -> Loader:
    """A loader of an old name: the module under its new name ``name``, left as it is."""
    import importlib.abc

    class _Alias(importlib.abc.Loader):
        def __init__(self) -> None:
            self.spec: ModuleSpec | None = None

        def create_module(self, spec: ModuleSpec) -> ModuleType:
            module = importlib.import_module(name)
            self.spec = module.__spec__
            return module

        def exec_module(self, module: ModuleType) -> None:
            module.__spec__ = self.spec  # the import system set the alias's; keep the module's own

    return _Alias()


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())
