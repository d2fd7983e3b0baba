"""The suite imports and runs without torch or numpy, and its checks survive -O."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BLOCK_TORCH = textwrap.dedent("""
    import sys
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split('.')[0] in ('torch', 'numpy'):
                raise ImportError(f'{name} is blocked for this test')
    sys.meta_path.insert(0, Block())
""")


def run_python(code: str, *flags: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *flags, "-c", code], capture_output=True,
                          text=True, cwd=cwd)


PLAIN = textwrap.dedent("""
    import contextlib, io, sys
    before = set(sys.modules)
    import kvoffload.conformance.target.host
    from kvoffload.conformance.target import lmcache_loader, mooncake_adapter, targets
    print(sorted({'urllib.request', 'http.client', 'importlib.metadata', 'ctypes',
                  'socket', 'subprocess', 'kvoffload.conformance.target.mooncake_cluster',
                  'argparse', 'importlib.abc', 'tempfile'} & (set(sys.modules) - before)))
    from kvoffload.conformance.cli import main
    with contextlib.redirect_stdout(io.StringIO()) as out:
        status = main(['demo'])
    print(status, 'agree with the spec' in out.getvalue(), 'hypothesis' in sys.modules,
          'kvoffload.conformance.traffic.command' in sys.modules)
    import kvoffload.conformance.reproduce
    print('hypothesis' in sys.modules)
    from kvoffload.conformance.reproduce import reproduce
    from kvoffload.spec import Call, Op
    reproduce('asserting.py:AssertingManager',
              {'capacity': 2, 'adapter': 'vllm-bool', 'assume': ['unique-keys']},
              [Call(Op.PREPARE_STORE, ('a',)), Call(Op.COMPLETE_STORE, ('a',)),
               Call(Op.COMPLETE_LOAD, ('a',))])
    print('conforms')
""")
"""Four checks, each seeing only what it must, one line each: what importing a host adds,
then what ``kvoffload demo`` adds (no Hypothesis), then what importing the reproducer adds
(no Hypothesis: the line before shows none before it), then a reproducer's run of a
manager whose preconditions are asserts (asserts on)."""

EVERY_MODULE = textwrap.dedent("""
    import importlib, pkgutil
    import kvoffload.conformance as package
    for info in pkgutil.walk_packages(package.__path__, 'kvoffload.conformance.'):
        if '.traffic.' not in info.name and not info.name.endswith('.vllm_wheels'):
            importlib.import_module(info.name)
    import kvoffload.conformance.target.vllm_wheels
    from kvoffload.conformance import check
    result = check('kvoffload.impl:OffloadManager', max_examples=5, steps=20, seed=1)
    assert result.verdict == 'conforms', result
    assert 'torch' not in sys.modules and 'numpy' not in sys.modules
    print('ok')
""")
"""Then every module of the suite imported, and a check run, with torch and numpy blocked
(:data:`BLOCK_TORCH`, from the interpreter's start: what :data:`PLAIN` imported was
imported under it too), a fifth line."""

PLAIN_THEN_EVERY_MODULE = BLOCK_TORCH + PLAIN + EVERY_MODULE
"""One fresh interpreter for the five checks (not one per check: each is about 0.1 s of
CPU, and the module walk imports again what :data:`PLAIN` imported, about 0.2 s)."""

OPTIMISED = textwrap.dedent("""
    import json, traceback
    from kvoffload.conformance.reproduce import reproduce
    from kvoffload.spec import Call, Op
    CASES = {
        'mutant': ('kvoffload.conformance.selftest.mutants:LookupPendingAsMiss',
                   {'capacity': 1}, [Call(Op.PREPARE_STORE, ('a',)), Call(Op.LOOKUP, ('a',))]),
        'asserting': ('asserting.py:AssertingManager',
                      {'capacity': 2, 'adapter': 'vllm-bool', 'assume': ['unique-keys']},
                      [Call(Op.PREPARE_STORE, ('a',)), Call(Op.COMPLETE_STORE, ('a',)),
                       Call(Op.COMPLETE_LOAD, ('a',))]),
    }
    for name, (target, config, calls) in CASES.items():
        try:
            reproduce(target, config, calls)
            raised = {'type': None, 'trace': ''}
        except BaseException as error:
            raised = {'type': type(error).__name__, 'trace': ''.join(
                traceback.format_exception(type(error), error, error.__traceback__))}
        print(json.dumps({name: raised}))
""")
"""Both reproducers under ``python -O`` in one interpreter: what each raised, with its trace."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the reproducers run in: a manager that asserts, as ``asserting.py``."""
    path = tmp_path_factory.mktemp("asserting")
    (path / "asserting.py").write_text(ASSERTING_MANAGER)
    return path


@pytest.fixture(scope="module")
def plain(folder: Path) -> subprocess.CompletedProcess[str]:
    """:data:`PLAIN_THEN_EVERY_MODULE`, run once for the module."""
    return run_python(PLAIN_THEN_EVERY_MODULE, cwd=folder)


@pytest.fixture(scope="module")
def optimised(folder: Path) -> dict[str, dict[str, str]]:
    """:data:`OPTIMISED`, run once for the module: what each reproducer raised."""
    done = run_python(OPTIMISED, "-O", cwd=folder)
    assert done.returncode == 0, done.stderr
    raised: dict[str, dict[str, str]] = {}
    for line in done.stdout.splitlines():
        raised.update(json.loads(line))
    return raised


def _lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines of :data:`PLAIN_THEN_EVERY_MODULE`'s output; all five, or its error."""
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 5, done.stderr
    return lines


def test_every_suite_module_imports_without_torch_or_numpy(
    plain: subprocess.CompletedProcess[str]
) -> None:
    assert plain.returncode == 0, plain.stderr
    assert _lines(plain)[4] == "ok"


def test_a_reproducer_does_not_import_hypothesis(
    plain: subprocess.CompletedProcess[str]
) -> None:
    assert _lines(plain)[2] == "False"


def test_violations_survive_optimised_python(optimised: dict[str, dict[str, str]]) -> None:
    raised = optimised["mutant"]
    assert raised["type"] == "PropertyViolation"
    assert "lookup" in raised["trace"]


ASSERTING_MANAGER = textwrap.dedent('''
    """A vLLM-era manager whose preconditions are asserts, as vLLM's are."""
    class ReqContext:
        pass

    class Spec:
        def __init__(self, ids):
            self.block_ids = ids

    class Out:
        def __init__(self, keys, ids):
            self.keys_to_store, self.store_spec, self.evicted_keys = keys, Spec(ids), []

    class AssertingManager:
        def __init__(self, num_blocks, cache_policy="lru", enable_events=False):
            self.slots, self.ready, self.refs = {}, set(), {}
            self.free = list(range(num_blocks))[::-1]

        def lookup(self, key, req_context) -> bool | None:
            if key not in self.slots:
                return False
            return True if key in self.ready else None

        def prepare_load(self, keys, req_context):
            for key in keys:
                assert key in self.ready, "not ready"
                self.refs[key] = self.refs.get(key, 0) + 1
            return Spec([self.slots[k] for k in keys])

        def complete_load(self, keys, req_context):
            for key in keys:
                assert self.refs.get(key, 0) > 0, "unmatched"
                self.refs[key] = self.refs.get(key, 0) - 1

        def prepare_store(self, keys, req_context):
            new = [k for k in dict.fromkeys(keys) if k not in self.slots]
            if len(new) > len(self.free):
                return None
            for key in new:
                self.slots[key] = self.free.pop()
            return Out(new, [self.slots[k] for k in new])

        def complete_store(self, keys, req_context, success=True):
            for key in dict.fromkeys(keys):
                if key in self.slots and key not in self.ready:
                    if success:
                        self.ready.add(key)
                    else:
                        self.free.append(self.slots.pop(key))
''')


def test_a_manager_that_asserts_conforms_only_with_asserts_on(
    plain: subprocess.CompletedProcess[str], optimised: dict[str, dict[str, str]]
) -> None:
    """An AssertionError counts as vLLM's rejection of misuse; under -O the asserts are
    gone, the misuse is accepted, and the suite says so (it does not assert itself)."""
    assert plain.returncode == 0, plain.stderr
    assert _lines(plain)[3] == "conforms"
    without = optimised["asserting"]
    assert without["type"] == "PropertyViolation"
    assert "property 'misuse' violated" in without["trace"]


def test_a_host_and_kvoffload_demo_import_only_what_they_use(
    plain: subprocess.CompletedProcess[str]
) -> None:
    """Every check starts a Python host, and every host imports the target kinds
    (targets.py): Mooncake's HTTP admin client (urllib.request: http, email) and the
    installed-version lookups (importlib.metadata) are imported where they are used, not
    by each host (about 35 ms of CPU a host, 18% of its start); so is Mooncake's cluster
    (ctypes, socket, subprocess: about 9 ms), and argparse (the judge's ``--lifeline N``
    is read without it: about 7 ms); so are importlib.abc (importlib.resources, pathlib,
    tempfile: the package's finder of old module names needs it only for an old name)
    and tempfile (shutil, bz2, lzma, random: one function of the options): 7 % of a
    host's instructions together. ``kvoffload demo`` plays
    the spec's scenarios: the corpus replay's imports (Hypothesis's engine) are the
    ``corpus`` command's, and the traffic simulator's the ``traffic`` command's, not
    the CLI's (one process checks both)."""
    host, demo = _lines(plain)[:2]
    assert host == "[]"
    assert demo == "0 True False False"
