"""Quick constructors for the spec's output records, which the manager builds on every call.

The spec's records are frozen dataclasses: their generated ``__init__`` sets each
field through ``object.__setattr__``, one call per field, which costs the manager
more than some of its operations. A record built here is made with ``object.__new__``
and gets its fields written straight into its ``__dict__`` (cheaper than building a
dict and assigning ``__dict__``, measured on Python 3.11), and is an ordinary
instance of the spec's class (equal, hashable and
printed the same). Each constructor is checked against the dataclass's own at import;
if a record's shape does not allow this (``__slots__``, ``__post_init__``, fields
outside ``__init__``), the dataclass itself is used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from kvoffload.spec.outputs import Completion, Events, LoadPlan, StorePlan

R = TypeVar("R")


def quick_constructor(cls: type[R]) -> Callable[..., R]:
    """A positional constructor for dataclass ``cls`` equivalent to ``cls(*fields)``."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]  # a dataclass; R cannot say so
    if ("__slots__" in vars(cls) or hasattr(cls, "__post_init__")
            or not all(f.init for f in fields)):
        return cls
    names = [f.name for f in fields]
    arguments = ", ".join(names)
    body = "".join(f"    fields[{name!r}] = {name}\n" for name in names)
    source = (f"def make({arguments}):\n"
              f"    record = new(cls)\n"
              f"    fields = record.__dict__\n"
              f"{body}"
              f"    return record\n")
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    exec(source, namespace)  # the same technique dataclasses uses for __init__
    make: Callable[..., R] = namespace["make"]
    sample = [object() for _ in names]
    quick, slow = make(*sample), cls(*sample)
    if quick != slow or vars(quick) != vars(slow) or type(quick) is not cls:
        return cls
    return make


store_plan = quick_constructor(StorePlan)
load_plan = quick_constructor(LoadPlan)
completion = quick_constructor(Completion)
events = quick_constructor(Events)
