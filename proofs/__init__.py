"""proofs: model checking, refinement and CrossHair runs over kvoffload (not installed).

Run from the repository root: ``python proofs/check.py --preset tiny`` (or
``python -m proofs.check``). ``proofs/README.md`` records every result and the command
that regenerates it.
"""
