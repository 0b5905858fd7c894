"""A lazy index walked over a schema's test instances as MaskBench walks it:
each instance's canonical tokens, one mask and one commit a token."""

from __future__ import annotations

import numpy as np

from .data import SchemaRecord, compact


def walk_instances(index, record: SchemaRecord, vocab) -> None:
    """Every valid, then every invalid instance of ``record`` through a
    :class:`tokendfa.Guide` of ``index``: the mask written, then the token
    committed; a refused token (or any error) ends that instance, as in
    MaskBench."""
    from tokendfa import Guide

    row = np.zeros((vocab.size + 31) // 32, dtype=np.int32)
    for valid in (True, False):
        for instance in record.instances(valid):
            guide = Guide(index)
            for token in vocab.encode(compact(instance)):
                try:
                    guide.write_mask_into(row)
                    guide.advance(token)
                except Exception:  # noqa: BLE001 - a refused token ends the instance
                    break


def measured_steps(record: SchemaRecord, vocab, start, stop, warm_up=None) -> list:
    """The walk of :func:`walk_instances` over a fresh lazy index of
    ``record`` (built after an untimed warm-up schema, ``{"type":
    "boolean"}`` unless given, as in a MaskBench child), each step (mask and commit) between ``mark =
    start()`` and ``stop(mark, step)``, whose answers are returned in order;
    ``[]`` for a schema the lazy engine refuses."""
    from tokendfa import Guide, Index

    try:
        Index.from_schema(warm_up or {"type": "boolean"}, vocab, lazy=True)
        index = Index.from_schema(record.schema, vocab, lazy=True)
    except Exception:  # noqa: BLE001 - a schema the lazy engine refuses has no steps
        return []
    row = np.zeros((vocab.size + 31) // 32, dtype=np.int32)
    found = []
    for valid in (True, False):
        for instance in record.instances(valid):
            guide = Guide(index)
            for step, token in enumerate(vocab.encode(compact(instance))):
                mark = start()
                try:
                    guide.write_mask_into(row)
                    guide.advance(token)
                    accepted = True
                except Exception:  # noqa: BLE001 - a refused token ends the instance, as in MaskBench
                    accepted = False
                found.append(stop(mark, step))
                if not accepted:
                    break
    return found
