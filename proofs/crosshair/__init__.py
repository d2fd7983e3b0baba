"""CrossHair over contracts written against the spec's public API, at stated bounds.

``python -m proofs.crosshair_check FILE`` runs ``crosshair check`` on FILE with this
package's plugin (:mod:`.plugin`): every ``CacheState`` argument ranges over the states
the spec reaches at a bound (:mod:`.domain`), keys over a small universe, and the spec's
functions run natively on the values CrossHair chose. ``proofs/README.md`` (section
CrossHair) says what this establishes and what it does not.
"""
