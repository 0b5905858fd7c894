"""The arrays of an index: exactly what an index file stores and a server reads.

:class:`IndexArrays` is the contract between the layers: builders produce
it, the file module writes and reads it, :class:`~tokendfa.runtime.index.Index`
serves it. It holds plain numpy arrays and nothing else, so every layer can
pass it around without importing another.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MASK_WORD = np.dtype("<u4")  # 32 tokens a word: bit i % 32 of word i // 32
INITIAL_STATE = 0


@dataclass(frozen=True, eq=False)
class IndexArrays:
    """The whole index as flat arrays: exactly what an index file stores."""

    token_group: np.ndarray    # int8/16/32[V] (the narrowest that fits): group of each token, -1 if never allowed
    state_offsets: np.ndarray  # int64[S + 1]: state s owns edges offsets[s]:offsets[s + 1]
    edge_group: np.ndarray     # int32[E]: groups allowed from the state, sorted
    edge_next: np.ndarray      # int32[E]: the state each group leads to
    finals: np.ndarray         # bool[S]
    mask_id: np.ndarray        # int32[S]: row of ``masks`` holding the state's allowed set
    masks: np.ndarray          # uint32[U, ceil(V / 32)]: distinct allowed sets, EOS included
    eos_token_ids: np.ndarray  # int32[k]
    forced_offsets: np.ndarray  # int64[S + 1]: state s's fast-forward tokens are
    forced_tokens: np.ndarray   # int32[F]: forced_tokens[forced_offsets[s]:forced_offsets[s + 1]]

    def as_dict(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def equals(self, other: "IndexArrays") -> bool:
        return all(np.array_equal(a, b) and a.dtype == b.dtype
                   for a, b in zip(self.as_dict().values(), other.as_dict().values()))
