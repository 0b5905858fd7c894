"""What every served index shares, eager or lazy: masks as 32-bit words.

An :class:`~tokendfa.runtime.index.Index` reads its masks from arrays; a
:class:`~tokendfa.lazy.LazyIndex` computes them on first request. Both
answer ``get_mask(state)`` with a ``uint32`` bitset (bit ``i % 32`` of word
``i // 32`` is token ``i``), and everything derived from that bitset is here
once: the allowed ids, the checks on token ids and caller buffers, and the
copy of a mask into a caller's numpy array or torch tensor.

May import: numpy and :mod:`tokendfa.analysis.errors` (torch only inside a
call that was handed a torch tensor).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis.errors import InvalidStateError, MaskBufferError


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

    def _check_token(self, token_id: int) -> None:
        if not 0 <= token_id < self._vocab_size:
            raise InvalidStateError(
                f"token id {token_id} is out of range: the vocabulary has ids 0..{self._vocab_size - 1}")
