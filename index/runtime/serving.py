"""What every served index shares, eager or lazy: masks as 32-bit words.

An :class:`~tokendfa.runtime.index.Index` reads its masks from arrays; a
:class:`~tokendfa.lazy.LazyIndex` computes them on first request. Both
answer ``get_mask(state)`` with a ``uint32`` bitset (bit ``i % 32`` of word
``i // 32`` is token ``i``), and everything derived from that bitset is here
once: the allowed ids, the checks on token ids and caller buffers, and the
copy of a mask into a caller's numpy array or torch tensor.

**Closing within a token budget.** A generation that may take ``R`` more
tokens (its ``max_tokens`` less those generated) must reach a final state
and emit EOS within them, or its text is cut off inside a value.
:meth:`MaskServing.closing_mask` allows, of a state's mask, the tokens after
which what the text still needs (:meth:`MaskServing.finish_bound`: a bound
on the tokens to a final state, plus one for EOS) fits in the ``R - 1``
tokens left, and EOS where the state is final. The bound is each index
type's (``_finish_distance``): a lazy index counts the shortest path in
bytes that are single-byte tokens of the vocabulary (ASCII and UTF-8
continuation bytes), an eager one the fewest tokens of its own graph; either way a generation inside it can
always close, so a restricted mask is never empty while the generation
started within reach of a final state. Far from the budget (every token's
successor needs at most ``R - 1``) the plain mask is served: one dict
lookup a step once a state's successors are known
(:meth:`MaskServing.needs_closing`). A lazy index's distances come from
closures of what follows a state (:mod:`tokendfa.analysis.closing`: every
state of a small schema exact at the first question) or, where those are
too big, a search that gives up past a bound on the states it visits (a
long way through a schema with many alternatives): such a state does not restrict the mask,
and is searched again when the budget has halved (a smaller search); nor
does a state from which no path of the counted steps reaches a final state
(a lazy index counts ASCII and UTF-8 continuation bytes: a completion that
must start a wider character). Closing is best effort there.

May import: numpy, :mod:`tokendfa.analysis.errors` and
:mod:`tokendfa.analysis.closing` (torch only inside a call that was handed
a torch tensor).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, NamedTuple

import numpy as np

from ..analysis.closing import FAR, UNKNOWN
from ..analysis.errors import InvalidStateError, MaskBufferError, check_id_type

# Restricted masks an index keeps (by state and threshold), least recently
# used dropped first: a batch of generations of one schema asks for the same
# ones near their budgets, in turn (Gemma: 32 kB a mask, 2 MiB in all).
# bench_vllm.py's warm batch of 16 asks for 20 a round: with 16 kept, each
# round dropped every one before it was asked again and rebuilt it from its
# row (0.26 s of a 4.0 s round, in-process cProfile); with 64 none.
_CLOSING_MASKS = 64
# The bytes of closing rows (each token of a state and where it ends, int32)
# an index keeps, least recently used dropped first: a lazy index computes a
# row again to have them (a cold row's time: a string state's row walks its
# loop's ~200k tokens on Gemma, ~16 ms, and is ~1.6 MB), a restricted mask
# from a kept row is one pass over the vocabulary's bits.
_CLOSING_ROW_BYTES = 16 << 20
_NO_NEEDS: dict = {}


class ClosingRow(NamedTuple):
    """Every allowed token of a state but EOS, and where each leads: the
    ``tokens`` and their ``ends``, and (a lazy index's loop) a ``loop``
    mask of tokens that all end in ``loop_end``."""

    tokens: np.ndarray          # int32
    ends: np.ndarray            # int32 (state ids)
    loop: np.ndarray | None     # uint32 words, or None
    loop_end: int

    @property
    def nbytes(self) -> int:
        return self.tokens.nbytes + self.ends.nbytes + (0 if self.loop is None else self.loop.nbytes) + 128


class _Needs:
    """What the successors of one state need to close: the distinct exact
    needs (sorted), a need every other successor is known to reach
    (:data:`FAR` when every successor's need is exact), and the budgets for
    which they hold (see :meth:`MaskServing._needs`)."""

    __slots__ = ("exact", "most", "beyond", "retry_below")

    def __init__(self, exact: list[int], beyond: int, retry_below: int) -> None:
        self.exact = exact
        self.most = exact[-1] if exact else 0
        self.beyond = beyond
        self.retry_below = retry_below   # a successor's search gave up: asked again below this limit

    def holds_for(self, remaining: int) -> bool:
        return (self.beyond >= FAR or remaining - 1 < self.beyond) and remaining - 2 > self.retry_below


class MaskServing:
    """Mixin for index types: subclasses set ``_vocab_size`` and ``_words``
    (``ceil(vocab_size / 32)``) and define ``get_mask``."""

    _vocab_size: int
    _words: int

    def get_mask(self, state: int) -> np.ndarray:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def row_ready(self, state: int) -> bool:
        """Whether ``get_mask(state)`` is served from memory, with no row to
        compute first (always, for an index read from arrays; a lazy index
        says whether the state's row is computed and kept)."""
        return True

    # --- closing within a token budget ---------------------------------------

    def _finish_distance(self, state: int, limit: int) -> int:  # pragma: no cover - every subclass defines it
        """Tokens from ``state`` to a final state (a sound bound): exact when
        at most ``limit``, else any number above ``limit``."""
        raise NotImplementedError

    def _closing_successors(self, state: int) -> np.ndarray:  # pragma: no cover
        """The distinct states the allowed tokens of ``state`` (EOS aside) lead to."""
        raise NotImplementedError

    def _closing_row(self, state: int) -> ClosingRow:  # pragma: no cover
        """Every allowed token of ``state`` but EOS, and the state each leads to."""
        raise NotImplementedError

    def _kept_closing_row(self, state: int) -> ClosingRow:
        lock = self.__dict__.get("_closing_lock")
        if lock is None:
            lock = self.__dict__.setdefault("_closing_lock", threading.Lock())
        with lock:
            rows = self.__dict__.setdefault("_closing_rows", OrderedDict())
            row = rows.get(state)
            if row is not None:
                rows.move_to_end(state)
                return row
        row = self._closing_row(state)
        with lock:
            rows[state] = row
            self._closing_row_bytes = self.__dict__.get("_closing_row_bytes", 0) + row.nbytes
            while self._closing_row_bytes > _CLOSING_ROW_BYTES and len(rows) > 1:
                _, dropped = rows.popitem(last=False)
                self._closing_row_bytes -= dropped.nbytes
        return row

    @property
    def closing_bytes(self) -> int:
        """The bytes this index keeps for closing within budgets (rows and masks)."""
        masks = self.__dict__.get("_closing_masks", {})
        return self.__dict__.get("_closing_row_bytes", 0) + len(masks) * (self._words * 4 + 128)

    def finish_bound(self, state: int, limit: int = FAR) -> int:
        """The tokens a generation in ``state`` needs to close: a bound on
        the tokens to a final state, plus one for EOS (1 in a final state).
        Exact when at most ``limit + 1``; above it, some larger number;
        :data:`~tokendfa.analysis.closing.UNKNOWN` (-1) when the bound
        cannot tell: a lazy index's search gave up (past its bound on
        states), or no path of the steps it counts reaches a final state."""
        distance = self._finish_distance(state, limit)
        return UNKNOWN if distance == UNKNOWN or distance >= FAR else distance + 1

    def _needs(self, state: int, remaining: int) -> _Needs:
        """The needs of the successors of ``state``, exact up to ``remaining
        - 1``. A successor the bound cannot tell about is left out: it does
        not restrict the mask (closing is then best effort); one whose
        search gave up is asked again when the budget has halved."""
        kept = self.__dict__.get("_closing_needs")
        if kept is None:
            kept = self.__dict__.setdefault("_closing_needs", {})
        found = kept.get(state)
        if found is not None and found.holds_for(remaining):
            return found
        limit = max(remaining - 2, 0)   # a need of remaining - 1 at most: a distance of remaining - 2
        exact, beyond, retry_below = set(), FAR, -1
        for successor in self._closing_successors(state).tolist():
            distance = self._finish_distance(successor, limit)
            if distance == UNKNOWN:
                retry_below = max(retry_below, limit // 2)
            elif distance <= limit:
                exact.add(distance + 1)
            elif distance < FAR:
                beyond = limit + 2
        found = kept[state] = _Needs(sorted(exact), beyond, retry_below)
        return found

    def needs_closing(self, state: int, remaining: int) -> bool:
        """Whether, with ``remaining`` tokens left (this one included), some
        allowed token of ``state`` leads where closing needs more than the
        ``remaining - 1`` left after it. A dict lookup once the state's
        successors were asked for (in any generation)."""
        found = self.__dict__.get("_closing_needs", _NO_NEEDS).get(state)
        if found is None or not found.holds_for(remaining):
            found = self._needs(state, remaining)
        # a successor known only to need more than remaining - 1 (beyond) is out too
        return found.most > remaining - 1 or found.beyond < FAR

    def closing_mask(self, state: int, remaining: int) -> np.ndarray | None:
        """The mask of ``state`` for a generation with ``remaining`` tokens
        left (this one included): the allowed tokens after which closing
        needs at most ``remaining - 1`` tokens (:meth:`finish_bound`), and
        EOS where ``state`` is final. None when that is the whole mask (far
        from the budget), or when it is empty (the generation cannot close
        in time whatever it picks: the caller serves the plain mask)."""
        if remaining < 1:
            return None
        if not self.needs_closing(state, remaining):
            return None
        needs = self._needs(state, remaining)
        threshold = remaining - 1
        fitting = [need for need in needs.exact if need <= threshold]
        key = (state, fitting[-1] if fitting else 0)
        lock = self.__dict__.get("_closing_lock")
        if lock is None:
            lock = self.__dict__.setdefault("_closing_lock", threading.Lock())
        with lock:
            masks = self.__dict__.setdefault("_closing_masks", OrderedDict())
            if key in masks:
                masks.move_to_end(key)
                return masks[key]
        mask = self._closing_mask(state, threshold)
        with lock:
            masks[key] = mask
            while len(masks) > _CLOSING_MASKS:
                masks.popitem(last=False)
        return mask

    def _closing_mask(self, state: int, threshold: int) -> np.ndarray | None:
        row = self._kept_closing_row(state)
        limit = max(threshold - 1, 0)
        fits = {}
        for end in np.unique(row.ends).tolist() + ([] if row.loop is None else [row.loop_end]):
            distance = self._finish_distance(end, limit)
            # the bound cannot tell (a search gave up, no counted path): not restricted
            fits[end] = distance == UNKNOWN or distance >= FAR or distance + 1 <= threshold
        good = np.array([end for end, fit in fits.items() if fit], dtype=np.int64)
        keep = np.isin(row.ends, good)
        allowed = np.zeros(self._words * 32, dtype=bool)
        allowed[row.tokens[keep]] = True
        if self.is_final(state):
            allowed[list(self.eos_token_ids)] = True
        mask = np.packbits(allowed, bitorder="little").view(np.uint32)
        if row.loop is not None and fits[row.loop_end]:
            mask |= row.loop
        elif not keep.any() and not self.is_final(state):
            return None
        mask.flags.writeable = False
        return mask

    def write_closing_mask_into(self, state: int, remaining: int, out, row: int | None = None) -> None:
        """:meth:`write_mask_into` with :meth:`closing_mask`: the plain mask
        when it is None."""
        mask = self.closing_mask(state, remaining)
        if mask is None:
            self.write_mask_into(state, out, row)
        else:
            self._copy_mask(mask, out, row)

    def get_tokens(self, state: int) -> np.ndarray:
        """Allowed token ids, sorted, as ``int32`` (EOS included in final states)."""
        bits = np.unpackbits(self.get_mask(state).view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[:self._vocab_size]).astype(np.int32)

    def _copy_mask(self, mask: np.ndarray, out, row: int | None) -> None:
        """Copy ``mask`` (uint32 words) into ``out``: a numpy array or torch
        tensor of int32/uint32 words, one row or a batch (``row``), at least
        as wide as the vocabulary; the words past it are cleared."""
        words = self._words
        if type(out) is not np.ndarray:
            if not out.is_cpu:  # torch on an accelerator: one copy to the device
                import torch

                target = out if row is None else self._row_of(out, row)
                self._check_width(target.shape[-1])
                target[:words].copy_(torch.from_numpy(mask.view(np.int32)).to(out.device))
                target[words:].zero_()
                return
            out = self._numpy_view_of(out)
        target = out if row is None else self._row_of(out, row)
        if target.dtype not in (np.dtype(np.uint32), np.dtype(np.int32)) or target.ndim != 1:
            raise MaskBufferError(
                f"the mask buffer must be int32 or uint32 words, one row or a batch of rows; "
                f"got {target.dtype} with shape {out.shape}")
        self._check_width(len(target))
        target[:words] = mask.view(target.dtype)
        target[words:] = 0

    def _numpy_view_of(self, tensor) -> np.ndarray:
        """A numpy view of a CPU tensor's memory, remembered for the few
        tensors last seen: making one (``Tensor.numpy()``) costs more than
        copying a 19 kB mask, and a generator passes the same bitmask tensor
        at every step. An entry is used only while its tensor still owns the
        same memory; holding it keeps at most a few caller buffers alive."""
        views: dict[int, tuple[Any, np.ndarray, int]] = self.__dict__.setdefault("_tensor_views", {})
        entry = views.get(id(tensor))
        if entry is not None and entry[0] is tensor and entry[2] == tensor.data_ptr():
            return entry[1]
        view = tensor.numpy()
        if len(views) >= 8:
            views.clear()  # one atomic step, safe with threads sharing the index
        views[id(tensor)] = (tensor, view, tensor.data_ptr())
        return view

    @staticmethod
    def _row_of(out, row: int):
        try:
            return out[row]
        except IndexError:
            raise MaskBufferError(f"row {row} is outside a batch of shape {tuple(out.shape)}") from None

    def _check_width(self, width: int) -> None:
        if width < self._words:
            raise MaskBufferError(
                f"the buffer has {width} words, the vocabulary needs {self._words}")

    def _check_token(self, token_id: int) -> int:
        """``token_id`` as a Python int (numpy's would make later arithmetic
        numpy's), or the precise error."""
        check_id_type(token_id, "token id")
        if not 0 <= token_id < self._vocab_size:
            raise InvalidStateError(
                f"token id {token_id} is out of range: the vocabulary has ids 0..{self._vocab_size - 1}")
        return int(token_id)
