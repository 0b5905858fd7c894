"""Adapters that plug an :class:`~tokendfa.Index` into text generators.

Reading order:

* :mod:`tokendfa.integrations.transformers`  a Hugging Face ``LogitsProcessor``
  serving a whole batch from one index (one :class:`~tokendfa.Guide` per row),
  and ``generate_constrained``, the one-call way to use it (outlines takes
  the same processor: ``outlines.Generator(model, processor=...)``)
* :mod:`tokendfa.integrations.vllm`  a vLLM (0.32, V1 runner) logits processor,
  loaded by every engine through an entry point, that serves each request
  asking for a constraint in ``SamplingParams.extra_args``

Each adapter imports its heavy dependency (torch, transformers, vLLM) at the top of
its own module, so nothing here is imported by ``import tokendfa``: a program
pays for transformers only when it imports the adapter.
"""
