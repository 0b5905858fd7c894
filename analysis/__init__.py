"""Static analysis of a pattern: pure functions over automata.

Reading order:

* :mod:`tokendfa.analysis.errors`         the one exception hierarchy (lowest layer)
* :mod:`tokendfa.analysis.regular_files`  paths tokendfa does not control: only regular
  files, opened without blocking, read with a size bound
* :mod:`tokendfa.analysis.utf8`           code points to UTF-8 byte ranges (the only place)
* :mod:`tokendfa.analysis.dfa`            the byte DFA type (dead state 0, initial 1) and
  the questions that only read it: walk, accepts, is_live_prefix
* :mod:`tokendfa.analysis.graph`          the one breadth-first walk: liveness,
  reachability, canonical numbering
* :mod:`tokendfa.analysis.byteclasses`    bytes no state can tell apart; dead bytes
* building a DFA, one step per module:

  * :mod:`tokendfa.analysis.construct`      the entry point, regex -> :class:`ByteDFA`
  * :mod:`tokendfa.analysis.regex_syntax`   Python's parser for both regex dialects,
    character sets as code points, precise errors for bad or unsupported regexes
  * :mod:`tokendfa.analysis.regex_compiler` parse tree -> Thompson NFA over byte
    ranges -> complete byte table (subset construction)
  * :mod:`tokendfa.analysis.minimise`       trim, minimise, renumber: the canonical form

* :mod:`tokendfa.analysis.lazydfa`        the same DFA, determinised one state at a
  time on demand (the lazy index's automaton); its hot path is compiled where a
  C compiler was at install (``_lazycore.c``, loaded by :mod:`tokendfa.analysis.native`)
* :mod:`tokendfa.analysis.closing`        how far a state is from a final state (the
  steps a generation needs to close within a token budget): on demand over a
  lazy byte DFA, or every state at once over a graph's adjacency arrays
* :mod:`tokendfa.analysis.literals`       runs of bytes the automaton forces
* :mod:`tokendfa.analysis.signatures`     tokens grouped by their byte-class sequence
* :mod:`tokendfa.analysis.algebra`        products of regexes (intersection,
  difference) written back as regexes

May import: numpy and the standard library. Nothing here imports the rest of
:mod:`tokendfa` (vocabularies, builders, the runtime, the schema compiler).
Code that only walks a DFA needs :mod:`~tokendfa.analysis.dfa` alone, not the
compiler.
"""
