"""Building an index: a pattern (or its byte DFA) and a vocabulary in,
:class:`~tokendfa.runtime.arrays.IndexArrays` and metadata out.

Reading order:

* :mod:`tokendfa.builder.config`       :class:`BuildConfig`, the frozen build
  configuration (method, jobs, limits, progress) passed down whole
* :mod:`tokendfa.builder.pipeline`     :func:`build_index`: pattern -> byte DFA
  -> edges -> arrays, and the build's metadata (:class:`BuiltIndex`)
* :mod:`tokendfa.builder.reference`    the brute-force build: every token from
  every state; the definition every other build is held to
* :mod:`tokendfa.builder.fast`         the fast build: signature prefix graphs
  walked level by level, in parallel with joblib
* :mod:`tokendfa.builder.narrow`       literal and narrow states walked byte by
  byte against the sorted vocabulary (part of the fast build)
* :mod:`tokendfa.builder.assemble`     raw edges -> canonical, compressed arrays
* :mod:`tokendfa.builder.fastforward`  forced tokens in canonical tokenization,
  found by walking the assembled arrays
* :mod:`tokendfa.builder.progress`     the progress line of long builds

The lazy index, which serves token rows before (or instead of) this
build, is a layer of its own beside it: :mod:`tokendfa.lazy`.

May import: :mod:`tokendfa.analysis`, :mod:`tokendfa.vocab`,
:mod:`tokendfa.runtime.arrays`, numpy and joblib; never
:mod:`tokendfa.runtime.index` (a test checks). Builders pass arrays;
wrapping them in an :class:`~tokendfa.Index` is the runtime's business
(:meth:`~tokendfa.Index.from_regex` imports this package inside the call).
"""

from .config import BuildConfig
from .pipeline import BuiltIndex, build_arrays, build_index

__all__ = ["BuildConfig", "BuiltIndex", "build_index", "build_arrays"]
