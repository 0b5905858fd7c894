"""The guide: one generation's small mutable cursor over a shared index.

An :class:`Index` is immutable and can serve any number of generations at
once, from any number of threads; each generation keeps its own
:class:`Guide`, which remembers the current state and the states before it
(for :meth:`Guide.rollback`, as speculative decoding needs).

A guide given ``max_tokens`` (the generation's token budget, EOS included)
closes within it: when few tokens are left, its masks allow only the tokens
after which the text can still reach a complete match and EOS in the tokens
that remain (:meth:`~tokendfa.runtime.serving.MaskServing.closing_mask`), so
a generation ends with a complete match, not cut off inside a value. Far
from the budget its masks are the index's own; the check costs a dict
lookup a step.
"""

from __future__ import annotations

import numpy as np

from ..analysis.errors import InvalidStateError, TokenNotAllowedError, check_id_type
from .index import Index


class Guide:
    """Walks one generation through ``index``, token by token."""

    __slots__ = ("index", "_states", "_ended", "_eos", "_budget")

    def __init__(self, index: Index, state: int | None = None, *, max_tokens: int | None = None) -> None:
        """``max_tokens``: the tokens this generation may still take from
        ``state`` on, EOS included (None: no budget). Where no allowed token
        leaves room to close (the generation started too short to close at
        all, see :meth:`tokens_to_close`), the index's own mask is served."""
        self.index = index
        self._states = [index.initial_state if state is None else state]
        # One flag per position: whether an EOS has been accepted there.
        self._ended = [False]
        self._eos = frozenset(index.eos_token_ids)  # asked at every advance
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer))
                                       or max_tokens < 0):
            raise ValueError(f"max_tokens must be a non-negative integer or None, not {max_tokens!r}")
        self._budget = None if max_tokens is None else int(max_tokens)

    @property
    def max_tokens(self) -> int | None:
        """The budget this guide closes within, or None."""
        return self._budget

    @property
    def remaining(self) -> int | None:
        """Tokens left in the budget (the next one included), or None without one."""
        return None if self._budget is None else self._budget - len(self._states) + 1

    def tokens_to_close(self) -> int:
        """A bound on the tokens that close the text from here, EOS included
        (:meth:`~tokendfa.runtime.serving.MaskServing.finish_bound`): that many
        always suffice; -1 when a lazy index's search for it gave up."""
        return self.index.finish_bound(self.state)

    def _closing(self) -> "np.ndarray | None":
        """The budget's mask for the current state, or None where the index's own is served."""
        # closing_mask answers None far from the budget itself (needs_closing)
        return self.index.closing_mask(self._states[-1], self.remaining)

    @property
    def state(self) -> int:
        return self._states[-1]

    @property
    def ended(self) -> bool:
        """Whether an EOS was accepted (the generation is over: no token is allowed)."""
        return self._ended[-1]

    def get_tokens(self) -> np.ndarray:
        """Allowed token ids (sorted int32); nothing once EOS was accepted."""
        if self._ended[-1]:
            return np.zeros(0, dtype=np.int32)
        if self._budget is not None:
            mask = self._closing()
            if mask is not None:
                bits = np.unpackbits(mask.view(np.uint8), bitorder="little")
                return np.flatnonzero(bits[:self.index.vocab_size]).astype(np.int32)
        return self.index.get_tokens(self.state)

    def get_mask(self) -> np.ndarray:
        """Allowed tokens as a read-only uint32 bitset (see :meth:`Index.get_mask`)."""
        if self._ended[-1]:
            return np.zeros_like(self.index.get_mask(self.state))
        if self._budget is not None:
            mask = self._closing()
            if mask is not None:
                return mask
        return self.index.get_mask(self.state)

    def write_mask_into(self, out, row: int | None = None) -> None:
        """Fill a caller's int32/uint32 buffer (see :meth:`Index.write_mask_into`)."""
        if self._ended[-1]:
            (out if row is None else out[row])[...] = 0
            return
        if self._budget is not None:
            # the index's own mask where closing_mask answers None (far from the budget)
            self.index.write_closing_mask_into(self._states[-1], self.remaining, out, row)
            return
        self.index.write_mask_into(self._states[-1], out, row)

    def forced_tokens(self) -> np.ndarray:
        """Tokens the pattern forces from here (see :meth:`Index.forced_tokens`);
        a generator may append them with :meth:`advance` without sampling."""
        if self._ended[-1]:
            return np.zeros(0, dtype=np.int32)
        return self.index.forced_tokens(self.state)

    def advance(self, token_id: int) -> int:
        """Consume ``token_id`` and return the new state."""
        if self._ended[-1]:
            raise TokenNotAllowedError(
                f"token {token_id} after EOS: this generation has already ended",
                state=self.state, token_id=token_id)
        state = self.index.advance(self._states[-1], token_id)
        self._states.append(state)
        self._ended.append(token_id in self._eos)
        return state

    def is_finished(self) -> bool:
        """True once EOS was accepted, or when the text is complete and
        nothing but EOS may follow."""
        if self._ended[-1]:
            return True
        return self.index.is_final(self.state) and len(self.index.get_tokens(self.state)) == len(
            self.index.eos_token_ids)

    def can_end(self) -> bool:
        """Whether the text so far is a complete match (EOS allowed now)."""
        return not self._ended[-1] and self.index.is_final(self.state)

    def rollback(self, count: int) -> None:
        """Undo the last ``count`` tokens."""
        check_id_type(count, "rollback count")
        if not 0 <= count < len(self._states):
            raise InvalidStateError(
                f"cannot roll back {count} tokens: only {len(self._states) - 1} were consumed")
        if count:
            del self._states[-count:]
            del self._ended[-count:]

    def reset(self) -> None:
        del self._states[1:]
        del self._ended[1:]

    def completed(self) -> "Guide":
        """This generation over the completed index: for a guide over a lazy
        index (:class:`~tokendfa.lazy.LazyIndex`), a guide over its
        ``complete()`` with the same history in that index's state ids (so
        :meth:`rollback` goes on working); for a guide over a whole
        :class:`Index`, a copy. The lazy index keeps serving too: both
        guides give the same masks and accept the same tokens from here on."""
        if isinstance(self.index, Index):
            return self.copy()
        whole = self.index.complete()
        twin = Guide.__new__(Guide)
        twin.index = whole
        twin._states = [self.index.completed_state(state) for state in self._states]
        twin._ended = list(self._ended)
        twin._eos = self._eos
        twin._budget = self._budget
        return twin

    def copy(self) -> "Guide":
        twin = Guide.__new__(Guide)
        twin.index = self.index
        twin._states = list(self._states)
        twin._ended = list(self._ended)
        twin._eos = self._eos
        twin._budget = self._budget
        return twin

    @property
    def num_tokens(self) -> int:
        return len(self._states) - 1
