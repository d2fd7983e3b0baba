"""An explicit-state model checker for kvoffload's spec and its environment.

The checked system is the spec's state together with the environment that drives it:
the scheduler's calls and the copy jobs that workers run and complete. Modules, in
reading order: :mod:`.bounds` (the finite bounds), :mod:`.model` (which transitions are
checked: the spec's or a mutant's), :mod:`.environment` (jobs, the call alphabet and
the checks on every call), :mod:`.properties` (checks on every state),
:mod:`.symmetry` (canonical forms), :mod:`.explorer` (breadth-first search, liveness,
traces), :mod:`.checks` (the named checks and their expected verdicts).
"""
