"""A lazy index walked over a schema's test instances as MaskBench walks it:
each instance's canonical tokens, one mask and one commit a token."""

from __future__ import annotations

import numpy as np

from .data import SchemaRecord, compact

# What a MaskBench child builds untimed before its schema, first mask
# included (bench_maskbench.WARM_UP_SCHEMAS["object"], its default --warm-up)
MASKBENCH_WARM_UP = {"type": "object", "properties": {
    "name": {"type": "string"}, "count": {"type": "integer"}, "score": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string"}}, "on": {"type": "boolean"}},
    "required": ["name"]}


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
    """MaskBench's steps (``bench_maskbench.run_engine``) over a fresh lazy
    index of ``record``: a warm-up schema built with its first mask, untimed
    (``warm_up``, :data:`MASKBENCH_WARM_UP` unless given), then the
    record's index and its first mask, untimed too (MaskBench's time to
    first mask, not one of its steps), then each instance in the record's
    order (valid and invalid as the file lists them, as MaskBench walks
    them) from a new guide, each step (mask and commit) between ``mark =
    start()`` and ``stop(mark, step)``, whose answers are returned in order;
    ``[]`` for a schema the lazy engine refuses. Step 0 is thus the first
    mask served again (a copy) and the first commit."""
    from tokendfa import Guide, Index

    row = np.zeros((vocab.size + 31) // 32, dtype=np.int32)
    try:
        Guide(Index.from_schema(warm_up or MASKBENCH_WARM_UP, vocab, lazy=True)).write_mask_into(row)
        index = Index.from_schema(record.schema, vocab, lazy=True)
        Guide(index).write_mask_into(row)
    except Exception:  # noqa: BLE001 - a schema the lazy engine refuses has no steps
        return []
    found = []
    for case in record.tests:
        guide = Guide(index)
        for step, token in enumerate(vocab.encode(compact(case.data))):
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
