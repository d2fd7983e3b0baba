"""The trace corpus: language-neutral JSON cases any engine can replay (docs/corpus.md).

The cases and their schema (:mod:`.corpus`, ``corpus_schema.json``), the committed
sources (``corpus_engines.json``, ``corpus_modelcheck.json``), writing a corpus
(:mod:`.corpus_write`), replaying one through the judge (:mod:`.corpus_replay`) and
the ``kvoffload corpus`` command (:mod:`.corpus_command`).
"""
