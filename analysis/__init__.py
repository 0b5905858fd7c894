"""Static analysis of a pattern: pure functions over automata.

Reading order:

* :mod:`tokendfa.analysis.errors`       the one exception hierarchy (lowest layer)
* :mod:`tokendfa.analysis.utf8`         code points to UTF-8 byte ranges (the only place)
* :mod:`tokendfa.analysis.regex_syntax` precise errors for bad or unsupported regexes
* :mod:`tokendfa.analysis.bytedfa`      regex -> complete, minimal byte-level DFA
* :mod:`tokendfa.analysis.lazydfa`      the same DFA, determinised one state at a time on demand
* :mod:`tokendfa.analysis.byteclasses`  bytes no state can tell apart; dead bytes
* :mod:`tokendfa.analysis.signatures`   tokens grouped by their byte-class sequence
* :mod:`tokendfa.analysis.algebra`      products of regexes: intersection,
  difference, subset and disjointness, written back as regexes

May import: numpy and the standard library. Nothing here imports the rest of
:mod:`tokendfa` (vocabularies, builders, the runtime, the schema compiler).
"""
