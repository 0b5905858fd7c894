"""Adapters that plug an :class:`~index.Index` into text generators.

Reading order:

* :mod:`index.integrations.transformers`  a Hugging Face ``LogitsProcessor``
  serving a whole batch from one index (one :class:`~index.Guide` per row),
  and ``generate_constrained``, the one-call way to use it

Each adapter imports its heavy dependency (torch, transformers) at the top of
its own module, so nothing here is imported by ``import index``: a program
pays for transformers only when it imports the adapter.
"""
