"""Building an index: a byte DFA and a vocabulary in, :class:`IndexArrays` out.

Reading order:

* :mod:`tokendfa.build.reference`    the brute-force build: every token from
  every state; the definition every other build is held to
* :mod:`tokendfa.build.fast`         the fast build: literal and narrow states
  walked against the sorted vocabulary, signature prefix graphs walked level
  by level, in parallel with joblib
* :mod:`tokendfa.build.lazy`         the lazy index: token rows computed on
  first request over a lazily determinised automaton; completes to the fast build
* :mod:`tokendfa.build.assemble`     raw edges -> canonical, compressed arrays
* :mod:`tokendfa.build.fastforward`  forced tokens in canonical tokenization

May import: :mod:`tokendfa.analysis`, :mod:`tokendfa.vocab`,
:mod:`tokendfa.runtime.arrays`, numpy and joblib. Builders return arrays;
wrapping them in an :class:`~tokendfa.Index` is the caller's business.
"""
