"""tests/deferred_import.py: names taken from a module at import, the module imported at
their first use; with LMCache, nothing else imported otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import deferred_import
from deferred_import import DEFERRED, Deferred, DeferredFunction, deferred

PACKAGE = """
import sys
LOADED = sys.modules.setdefault("loaded_count", [])
LOADED.append(1)

class Thing:
    size = 3

    def __init__(self, value):
        self.value = value
"""


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``heavy`` (counts its imports) and ``user`` (``from heavy import Thing``)."""
    (tmp_path / "heavy.py").write_text(PACKAGE)
    (tmp_path / "user.py").write_text("from heavy import Thing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("heavy", "user", "loaded_count"):
        sys.modules.pop(name, None)


@pytest.mark.usefixtures("package")
def test_a_deferred_name_imports_its_module_at_its_first_use() -> None:
    with deferred({"heavy": ("Thing",)}):
        import user  # type: ignore[import-not-found]
    assert "heavy" not in sys.modules  # the stand-in is gone, and nothing imported it
    assert isinstance(user.Thing, Deferred)
    assert user.Thing.size == 3  # a use: the real module, imported now
    assert sys.modules["loaded_count"] == [1]
    assert user.Thing(5).value == 5
    import heavy  # type: ignore[import-not-found]

    assert isinstance(user.Thing(1), heavy.Thing)
    assert sys.modules["loaded_count"] == [1]  # once


@pytest.mark.usefixtures("package")
def test_only_the_names_given_are_deferred() -> None:
    with deferred({"heavy": ("Other",)}), pytest.raises(ImportError):
        import user  # noqa: F401
    assert "heavy" not in sys.modules
    with deferred({"heavy": ("Thing",)}):
        stand_in = sys.modules["heavy"]
        assert not hasattr(stand_in, "__file__")  # what inspect and torch ask of every module
        assert not hasattr(Deferred("heavy", "Thing"), "__wrapped__")
    assert "loaded_count" not in sys.modules


@pytest.mark.usefixtures("package")
def test_a_module_imported_already_is_not_replaced() -> None:
    import heavy

    with deferred({"heavy": ("Thing",)}):
        import user
    assert user.Thing is heavy.Thing


DECORATOR = """
import sys
sys.modules.setdefault("loaded_count", []).append(1)

def twice(*options, **keywords):
    def decorate(function):
        return lambda *args: 2 * function(*args) + len(options) + len(keywords)
    return decorate(options[0]) if options and callable(options[0]) else decorate
"""

KERNELS = '''
from twice import twice


@twice(cache=True)
def add(a, b):
    """a + b"""
    return a + b


@twice
def one():
    return 1
'''


def test_a_deferred_decorator_decorates_at_the_first_call(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (package / "twice.py").write_text(DECORATOR)
    (package / "kernels.py").write_text(KERNELS)
    monkeypatch.setattr(deferred_import, "DECORATORS", {("twice", "twice")})
    with deferred({"twice": ("twice",)}):
        import kernels  # type: ignore[import-not-found]
    assert "loaded_count" not in sys.modules  # applied at import, twice was not imported
    assert isinstance(kernels.add, DeferredFunction)
    assert (kernels.add.__name__, kernels.add.__doc__) == ("add", "a + b")
    assert kernels.add(1, 2) == 7  # 2 * 3 + one keyword
    assert kernels.add(2, 2) == 9
    assert kernels.one() == 3  # @twice alone: 2 * 1 + the function itself as an option
    assert sys.modules["loaded_count"] == [1]
    for name in ("twice", "kernels"):
        sys.modules.pop(name, None)


IMPORTS = """
import json, sys
sys.path.insert(0, sys.argv[2])
import torch
before = set(sys.modules)
if sys.argv[1] == "alone":
    from deferred_import import DEFERRED
    for module, names in DEFERRED.items():
        for name in names:
            getattr(__import__(module), name)
elif sys.argv[1] == "deferred":
    from zygote import import_lmcache_here
    import_lmcache_here()
else:
    from zygote import PRELOADED
    for name in (*PRELOADED, "lmcache.v1.storage_backend.local_disk_backend"):
        __import__(name)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.mark.wide
@pytest.mark.lmcache
def test_lmcache_imports_what_it_imports_without_the_stand_ins_but_theirs() -> None:
    """LMCache's import with :data:`DEFERRED` deferred brings in exactly the modules its
    plain import does, less those importing the deferred modules alone brings in: no import-time
    branch of LMCache or torch went another way for the stand-in. (Three interpreters
    importing torch and LMCache: in the wide tier; the default tier's LMCache tests run
    on the deferred import.)"""
    tests = str(Path(__file__).resolve().parent)

    def imported(how: str) -> set[str]:
        done = subprocess.run([sys.executable, "-c", IMPORTS, how, tests], capture_output=True,
                              text=True, timeout=300, check=True)
        return set(json.loads(done.stdout.splitlines()[-1]))

    plain, lazy, alone = imported("plain"), imported("deferred"), imported("alone")
    assert set(DEFERRED) <= plain
    assert lazy <= plain
    assert plain - lazy <= alone
    assert not {name for name in lazy if name.split(".")[0] in DEFERRED}


ENCODE = """
import sys
sys.path.insert(0, sys.argv[2])
import torch
if sys.argv[1] == "deferred":
    from zygote import import_lmcache_here
    import_lmcache_here()
from lmcache.v1.platform.torch_ops import cachegen_kernels as kernels
torch.manual_seed(0)
symbols = torch.randint(0, 8, (2, 16, 3), dtype=torch.uint8)
cdf = kernels.calculate_cdf(symbols, 8)
out = torch.zeros(2, 3, 64, dtype=torch.uint8)
lengths = torch.zeros(2, 3, dtype=torch.int32)
kernels.encode_fast_new(cdf, symbols, out, lengths)
print(type(kernels._encode_single_channel).__name__, lengths.tolist(), out.tolist())
"""


@pytest.mark.wide
@pytest.mark.lmcache
def test_a_deferred_njit_kernel_computes_what_the_numba_one_does() -> None:
    """LMCache's CacheGen encoder, whose per-channel kernel is ``@njit(cache=True)``: the
    same bytes with the kernel deferred as with numba's dispatcher made at import."""
    tests = str(Path(__file__).resolve().parent)

    def encoded(how: str) -> tuple[str, str]:
        done = subprocess.run([sys.executable, "-c", ENCODE, how, tests], capture_output=True,
                              text=True, timeout=300, check=True)
        kind, _, data = done.stdout.splitlines()[-1].partition(" ")
        return kind, data

    plain, lazy = encoded("plain"), encoded("deferred")
    assert (plain[0], lazy[0]) == ("CPUDispatcher", "DeferredFunction")
    assert lazy[1] == plain[1]
