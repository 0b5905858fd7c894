"""Vocabularies: token id -> exact bytes, and the adapters that read tokenizers.

Reading order:

* :mod:`tokendfa.vocab.vocabulary`  :class:`Vocabulary`, the core type: exact
  bytes per token, EOS ids, a fingerprint, and the per-vocabulary tables the
  build reuses
* :mod:`tokendfa.vocab.tokenizers`  every tokenizer quirk (tiktoken, tekken,
  SentencePiece, Hugging Face) and the built-in vocabularies

May import: numpy, the standard library and :mod:`tokendfa.analysis`; each
adapter imports its tokenizer library (transformers, sentencepiece, tiktoken)
only inside the functions that need it, so ``Vocabulary`` itself is cheap.
"""

from .vocabulary import Vocabulary

__all__ = ["Vocabulary"]
