"""Serving an index: the arrays, the immutable :class:`Index`, the :class:`Guide`
cursor, and index files.

Reading order:

* :mod:`tokendfa.runtime.arrays`  :class:`IndexArrays`, what a file stores
* :mod:`tokendfa.runtime.serving` what every served index shares (eager or
  lazy): allowed ids from a mask, the copy into a caller's numpy/torch buffer
* :mod:`tokendfa.runtime.index`   :class:`Index`: ``get_mask`` / ``get_tokens`` /
  ``advance`` in constant time
* :mod:`tokendfa.runtime.guide`   :class:`Guide`: one generation's cursor
* :mod:`tokendfa.runtime.batch`   :func:`fill_masks`: a batch's masks in one
  call, the cold rows of lazy indexes on a few threads
* :mod:`tokendfa.runtime.files`   versioned msgpack + raw-array files,
  validated on load, written atomically

May import: numpy, msgpack, the standard library,
:mod:`tokendfa.analysis.errors`, :mod:`tokendfa.analysis.limits` (the
memory budget a file's announced sizes are held to),
:mod:`tokendfa.analysis.regular_files` (files written atomically) and
:mod:`tokendfa.analysis.closing` (the distances that closing within a token
budget needs), each numpy and the standard library only. Never the builder, the schema compiler,
interegular, joblib, transformers or torch at module level: a generator that
loads an index file pays for none of them (a test checks). The convenience
constructors ``Index.from_regex`` / ``Index.from_schema`` import the builder
inside the call (and return a lazy index by default:
:class:`tokendfa.lazy.LazyIndex`; ``lazy=False`` builds the whole
:class:`Index`).
"""

from .arrays import IndexArrays
from .batch import fill_masks
from .guide import Guide
from .index import Index

__all__ = ["Index", "Guide", "IndexArrays", "fill_masks"]
