"""A build from end to end: a pattern and a vocabulary in, arrays and metadata out.

:func:`build_index` compiles the pattern to a byte DFA (unless the caller
has it), checks its size against the configuration, runs the chosen build
(:mod:`tokendfa.builder.reference` or :mod:`tokendfa.builder.fast`), assembles
the arrays (:mod:`tokendfa.builder.assemble`) and describes the build in a
metadata dict. It returns a :class:`BuiltIndex`, plain data: wrapping it in
an :class:`~tokendfa.Index` is the runtime's business
(:meth:`tokendfa.Index.from_regex`), so the builder never imports it.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..analysis.construct import byte_dfa_from_regex
from ..analysis.dfa import ByteDFA
from ..analysis.errors import BuildLimitError
from ..runtime.arrays import IndexArrays
from ..vocab.vocabulary import Vocabulary
from .assemble import assemble_without_forced
from .config import BuildConfig
from .fast import signature_edges
from .fastforward import PendingForcedTokens
from .progress import Progress
from .reference import reference_edges


@dataclass(frozen=True, eq=False)
class BuiltIndex:
    """What a build gives: the index arrays and the metadata a file stores
    with them (pattern, vocabulary, build method and time)."""

    arrays: IndexArrays
    metadata: dict[str, Any]
    # With build_index(..., forced_later=True): ``arrays`` have an empty
    # fast-forward table, and this, called with them, gives them with the
    # table (see PendingForcedTokens), under the build's limits.
    forced_later: Callable[[IndexArrays], IndexArrays] | None = None


def build_index(pattern: str, vocabulary: Vocabulary, config: BuildConfig = BuildConfig(), *,
                definitions: dict[str, str] | None = None,
                dfa: ByteDFA | None = None, forced_later: bool = False) -> BuiltIndex:
    """Compile ``pattern`` for ``vocabulary`` into index arrays.

    ``definitions`` are the shared pieces a schema's pattern refers to
    (:class:`tokendfa.schema.api.SchemaRegex`); ``dfa``, the pattern's byte
    DFA when the caller has already built it. With ``forced_later`` the
    fast-forward table is left to :attr:`BuiltIndex.forced_later` (what
    :class:`~tokendfa.runtime.index.Index` does: it makes the table when
    first asked for it).
    """
    started = time.perf_counter()
    definitions = definitions or {}
    reporter = Progress(config.progress)
    try:
        with config.limits(), bounded_resources():
            dfa, (arrays, pending) = _compile_and_build(pattern, vocabulary, config, definitions, dfa, reporter)
            if not forced_later:
                arrays, pending = pending(arrays), None
            else:
                pending = _within_limits(pending, config)
    finally:
        reporter.close()
    metadata = {
        "kind": "regex",
        "pattern": readable_pattern(pattern, definitions),
        "vocabulary": {
            "name": vocabulary.name,
            "source": vocabulary.source,
            "fingerprint": vocabulary.fingerprint,
            "size": vocabulary.size,
        },
        "build": {
            "method": config.method,
            "byte_dfa_states": dfa.num_states,
            "seconds": round(time.perf_counter() - started, 4),
        },
    }
    if definitions:
        metadata["shared"] = [readable_pattern(text, definitions) for text in definitions.values()]
    return BuiltIndex(arrays, metadata, pending)


def _within_limits(pending: PendingForcedTokens, config: BuildConfig) -> Callable[[IndexArrays], IndexArrays]:
    """``pending`` run under the build's limits when it is called: a budget
    of its own, as long as the build's (a 5,000-byte literal's table is
    millions of tokens), and running out is the build's error, not a traceback."""
    def fill(arrays: IndexArrays) -> IndexArrays:
        with config.limits(), bounded_resources():
            return pending(arrays)
    return fill


def _compile_and_build(pattern: str, vocabulary: Vocabulary, config: BuildConfig,
                       definitions: dict[str, str], dfa: ByteDFA | None,
                       reporter: Progress) -> tuple[ByteDFA, tuple[IndexArrays, PendingForcedTokens]]:
    reporter.update("compiling the pattern")
    if dfa is None:
        # Bounded during the subset construction, so (a|b)*a(a|b){24} stops at 2 x the
        # limit (~12 s, 0.7 GB) rather than exhausting memory; twice, since the subsets
        # can outnumber the minimal states (8.9 x on tests/data/o10088.regex); at least
        # 1,000, so a small limit is reported with the exact minimal count below.
        dfa = byte_dfa_from_regex(pattern, definitions=definitions,
                                  max_dfa_states=max(2 * config.state_limit, 1000))
    if dfa.num_states - 1 > config.state_limit:
        raise BuildLimitError(
            f"the pattern's automaton has {dfa.num_states - 1} states, more than the limit "
            f"of {config.state_limit} (raise max_states to build it anyway)",
            reached=dfa.num_states - 1)
    return dfa, _arrays_and_forced(dfa, vocabulary, config, reporter)


@contextlib.contextmanager
def bounded_resources():
    """The last line of defence under the checks of :mod:`tokendfa.analysis.limits`:
    memory that runs out anyway (a process under ``ulimit -v``) or nesting
    deeper than Python's stack becomes a :class:`BuildLimitError`, one line
    for the CLI, instead of a traceback. The build holds nothing half-done
    outside its own frames, so unwinding leaves no trace."""
    try:
        yield
    except MemoryError:
        raise BuildLimitError("the build ran out of memory (lower max_states or memory_budget, "
                              "or give the process more memory)") from None
    except RecursionError:
        raise BuildLimitError("the pattern is nested too deeply to build") from None


def build_arrays(dfa: ByteDFA, vocabulary: Vocabulary, config: BuildConfig = BuildConfig(),
                 progress: Progress | None = None) -> IndexArrays:
    """The index arrays of ``dfa`` for ``vocabulary``, by ``config.method``."""
    arrays, forced_later = _arrays_and_forced(dfa, vocabulary, config, progress)
    return forced_later(arrays)


def _arrays_and_forced(dfa: ByteDFA, vocabulary: Vocabulary, config: BuildConfig,
                       progress: Progress | None) -> tuple[IndexArrays, PendingForcedTokens]:
    progress = progress or Progress(False)
    if config.method == "reference":
        progress.update("walking every token from every state")
        raw = reference_edges(dfa, vocabulary)
    else:
        raw = signature_edges(dfa, vocabulary, config, progress)
    progress.update("assembling the index")
    return assemble_without_forced(dfa, raw, vocabulary)


def readable_pattern(text, definitions: dict) -> str:
    """A pattern (text, or a regex tree written out) for the metadata:
    placeholders (lone surrogates, not UTF-8) as ``<shared N>``."""
    if not isinstance(text, str):
        from ..analysis.regex_tree import to_regex

        return to_regex(text, names={key: f"<shared {number}>" for number, key in enumerate(definitions)})
    for number, placeholder in enumerate(definitions):
        text = text.replace(placeholder, f"<shared {number}>")
    return text
