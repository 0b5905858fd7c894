"""Loading the package's optional compiled modules.

Four small C extensions speed up lazy indexes: ``tokendfa.analysis._lazycore``
(the subset construction's hot path), ``tokendfa.analysis._thompson`` (the
Thompson construction of a regex tree, for both the lazy and the eager
automata, and the tree nodes' stored hash), ``tokendfa.lazy._cwalk`` (the walk of a token row,
:data:`COMPILED_WALK`; the eager build's exact walk uses it too) and
``tokendfa.lazy._classruns`` (a counted class's runs over a vocabulary, for
the chain rows). They are
built at install where a C compiler is present and are optional: without
them the Python and numpy code they stand in for gives the same answers,
slower. ``TOKENDFA_NATIVE=0`` in the environment turns them all off (the
tests run both ways). Imports nothing from tokendfa.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["COMPILED_WALK", "native_module"]

# The compiled token walk's module, named here once for the two layers that
# load it: the lazy engine (its rows) and the builder (its exact walk).
COMPILED_WALK = "tokendfa.lazy._cwalk"


def native_module(name: str) -> ModuleType | None:
    """The compiled module ``name`` (absolute), or None when it was not built
    or ``TOKENDFA_NATIVE=0``."""
    if os.environ.get("TOKENDFA_NATIVE", "1") == "0":
        return None
    try:
        return importlib.import_module(name)
    except ImportError:  # built without a compiler
        return None
