"""The lazy engine (placeholder while moving; see the next commit)."""

from .index import LAZY_ANY_DEPTH, NATIVE_WALK, LazyIndex, prepare_vocabulary, tables_ready, vocabulary_tables

__all__ = ["LazyIndex", "LAZY_ANY_DEPTH", "NATIVE_WALK", "prepare_vocabulary", "tables_ready", "vocabulary_tables"]
