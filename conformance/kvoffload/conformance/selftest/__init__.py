"""The self-test, ``kvoffload check --self-test``: does the suite kill every seeded bug?

The seeded-bug variants of the reference manager (:mod:`.mutants`), the catalogue
of what each must fail and the run (:mod:`.selftest`), and its report
(:mod:`.selftest_report`).
"""
