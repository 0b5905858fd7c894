"""The lazy engine: an index that serves token masks from the moment its
automaton exists, computing each state's row the first time it is asked for.

It is a layer of its own beside the eager builder (:mod:`tokendfa.builder`),
as regex-automata keeps its lazy DFA (``hybrid``) beside its dense one: the
builder makes whole index arrays ahead of time; this layer serves the same
answers on demand, and completes to the builder's arrays when asked
(:meth:`LazyIndex.complete`). Its byte automaton,
:class:`~tokendfa.analysis.lazydfa.LazyByteDFA`, lives with the other
automata in :mod:`tokendfa.analysis`.

Reading order:

* :mod:`tokendfa.lazy.index`       :class:`LazyIndex`: serving (masks,
  advance), computing a state's token row (walk, loop and chain rows),
  token-liveness, completion in the background and to the eager index
* :mod:`tokendfa.lazy.tables`      the per-vocabulary tables the rows read
  and the caches they fill (tail sets, loop masks, class runs), made once
  per vocabulary; :func:`prepare_vocabulary` makes them ahead
* :mod:`tokendfa.lazy.table_store` those tables kept in the cache folder for
  the next process of the same vocabulary (:func:`load_or_make_tables`)
* :mod:`tokendfa.lazy.plans`       walk and chain plans: which tokens a cold
  row walks and from where, cached per vocabulary, packed for the walk
* :mod:`tokendfa.lazy.kernels`     the compiled module of a cold row
  (``_cwalk.c``: its walk, plan, start states, mask and successors;
  optional: :data:`NATIVE_WALK`) and the numpy passes the other modules share
* :mod:`tokendfa.lazy.completion`  a lazy index's states mapped to its
  completed index's (:meth:`LazyIndex.state_map`)
* :mod:`tokendfa.lazy.warmup`      the JSON schemas and texts whose walk
  makes the common plans at start-up (:data:`WARM_UP`, :func:`walk_texts`,
  what the runtime's preparer walks)

May import: :mod:`tokendfa.analysis`, :mod:`tokendfa.vocab`,
:mod:`tokendfa.runtime.arrays`, :mod:`tokendfa.runtime.serving`, numpy, and
:mod:`tokendfa.builder.config` (the one :class:`BuildConfig` both engines
take); the eager build (:mod:`tokendfa.builder.pipeline`) only inside the
calls that need it (completion, the metadata's readable pattern). Never
:mod:`tokendfa.runtime.index`: the runtime passes its ``Index`` class down,
and imports this package only inside its calls (a test checks both).
Other layers use the names below and no other.
"""

from .index import DEFAULT_ROW_BUDGET, LAZY_ANY_DEPTH, LazyIndex
from .kernels import NATIVE_WALK
from .table_store import load_or_make_tables
from .tables import prepare_vocabulary, tables_ready, vocabulary_tables
from .warmup import WARM_UP, WarmUp, walk_texts

__all__ = ["LazyIndex", "LAZY_ANY_DEPTH", "DEFAULT_ROW_BUDGET", "NATIVE_WALK", "prepare_vocabulary", "tables_ready", "vocabulary_tables",
           "load_or_make_tables", "WARM_UP", "WarmUp", "walk_texts"]
