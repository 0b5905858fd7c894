"""Structure-aware mutations of index files, and the oracle that judges a load.

A mutant starts from a real index file (:func:`seed_files`: a few small
indexes over a toy vocabulary, compressed and raw) and changes what a forger
would: one header field (a boolean, a huge or negative number, a wrong type,
a missing key), an array's shape, offset or encoding, an array's contents
(re-encoded, so every checksum is valid), or random bytes with both
checksums recomputed. :func:`judge` loads a mutant and says whether the
outcome is allowed: an :class:`~tokendfa.IndexFileError`, or an index whose
every mask agrees with :meth:`~tokendfa.Index.advance` token for token and
offers nothing past the vocabulary. Anything else (another exception, an
inconsistent index) is a finding.

Used by tests/test_file_fuzz.py (the committed corpus under tests/fuzz/corpus)
and by tests/fuzz/fuzz_index_files.py (the long fuzz run).
"""

from __future__ import annotations

import copy
import os
import random
import struct
import tempfile
import zlib
from typing import NamedTuple

import msgpack
import numpy as np

from tokendfa import Index, IndexFileError, TokenDFAError, Vocabulary
from tokendfa.runtime.arrays import IndexArrays
from tokendfa.runtime.files import decode_index, encode_index

SEED_TOKENS = [b"a", b"b", b"c", b"ab", b"{", b"}", b'"', b":", b"0", b"1", b"12", None, b"abc",
               b",", b'"a', None]
SEED_EOS = 11
SEED_PATTERNS = [r"(ab)+c?", r'\{"a":[0-9]{1,3}(,"b":"[abc]*")?\}', r"[abc]*", r"a|b"]

_PREAMBLE = struct.Struct("<8sII")
_ALIGNMENT = 64

INTERESTING = [True, False, None, 0, 1, -1, 2, 3, 7, 31, 32, 63, 64, 255, 256, 2**15, 2**16,
               2**31 - 1, 2**31, 2**32, 2**33, 2**62, 2**63 - 1, 2**63, 2**64 - 1, -2**63, 1.5,
               "", "raw", "zlib", "runs", "row-delta-runs", "<i4", "<i8", "|b1", "<u4", "|i1",
               "masks", "finals", [], [0], [1, 1], [2**33, 2**31], [True], {}, {"a": 1}, b"x"]


def seed_vocabulary() -> Vocabulary:
    return Vocabulary(SEED_TOKENS, eos_token_ids=SEED_EOS, name="fuzz-seed")


def seed_files() -> list[bytes]:
    """Real index files: each pattern, compressed and raw."""
    vocabulary = seed_vocabulary()
    files = []
    for pattern in SEED_PATTERNS:
        index = Index.from_regex(pattern, vocabulary, lazy=False)
        files.append(encode_index(index, compress=True))
        files.append(encode_index(index, compress=False))
    return files


def _aligned(size: int) -> int:
    return -(-size // _ALIGNMENT) * _ALIGNMENT


class Parts(NamedTuple):
    header: dict
    data: bytes


def split(raw: bytes) -> Parts:
    _, size, _ = _PREAMBLE.unpack_from(raw, 0)
    header = msgpack.unpackb(raw[_PREAMBLE.size:_PREAMBLE.size + size], raw=False)
    return Parts(header, raw[_aligned(_PREAMBLE.size + size):])


def join(header: dict, data: bytes, *, fix_data_crc: bool = True) -> bytes:
    """A file of ``header`` and ``data``; the header's checksum always valid."""
    header = dict(header)
    if fix_data_crc:
        header["data_size"], header["data_crc"] = len(data), zlib.crc32(data)
    packed = msgpack.packb(header, use_bin_type=True)
    head = _PREAMBLE.pack(b"TOKENDFA", len(packed), zlib.crc32(packed)) + packed
    return head + b"\0" * (_aligned(len(head)) - len(head)) + data


def _arrays_of(raw: bytes) -> tuple[dict[str, np.ndarray], dict]:
    """Writable copies of a (valid) file's arrays, and its metadata."""
    index = decode_index(raw)
    return {name: np.array(array) for name, array in index.arrays.as_dict().items()}, index.metadata


# --- the mutations ---------------------------------------------------------------

def _header_field(rng: random.Random, raw: bytes) -> tuple[str, bytes]:
    """One value anywhere in the header replaced (or deleted)."""
    header, data = split(raw)
    paths = []

    def walk(node, path):
        if isinstance(node, dict):
            for key, value in node.items():
                paths.append(path + (key,))
                walk(value, path + (key,))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                paths.append(path + (i,))
                walk(value, path + (i,))

    walk(header, ())
    path = rng.choice(paths)
    parent = header
    for step in path[:-1]:
        parent = parent[step]
    value = copy.deepcopy(rng.choice(INTERESTING))
    if isinstance(parent, dict) and rng.random() < 0.15:
        del parent[path[-1]]
        return f"header-del-{'.'.join(map(str, path))}", join(header, data, fix_data_crc=False)
    parent[path[-1]] = value
    return f"header-{'.'.join(map(str, path))}={value!r}"[:80], join(header, data, fix_data_crc=False)


def _entry(rng: random.Random, header: dict) -> dict:
    return rng.choice(header["arrays"])


def _shape(rng: random.Random, raw: bytes) -> tuple[str, bytes]:
    """An array's shape changed, its byte count kept or made to agree."""
    header, data = split(raw)
    entry = _entry(rng, header)
    shape = list(entry["shape"])
    choice = rng.randrange(5)
    if choice == 0:
        shape[rng.randrange(len(shape))] = rng.choice(INTERESTING)
    elif choice == 1:
        shape = shape + [rng.choice([0, 1, 2])]
    elif choice == 2:
        shape = shape[:-1]
    elif choice == 3:
        shape = [2**33, 2**31][:max(1, len(shape))] if len(shape) < 2 else [2**33, 2**31]
    else:
        shape[rng.randrange(len(shape))] += rng.choice([-2, -1, 1, 2, 32])
    entry["shape"] = shape
    if rng.random() < 0.6 and all(type(n) is int for n in shape):
        itemsize = np.dtype(entry["dtype"]).itemsize
        count = 1
        for n in shape:
            count *= n
        entry["nbytes"] = (count * itemsize) % (1 << 64) if rng.random() < 0.3 else count * itemsize
        if entry.get("encoding", "raw") == "raw" and rng.random() < 0.7:
            entry["stored_nbytes"] = entry["nbytes"]
    return f"shape-{entry['name']}={shape!r}"[:80], join(header, data)


def _offset(rng: random.Random, raw: bytes) -> tuple[str, bytes]:
    header, data = split(raw)
    entry = _entry(rng, header)
    key = rng.choice(["offset", "stored_nbytes", "nbytes"])
    entry[key] = rng.choice([0, 1, 63, 64, len(data), len(data) - 1, entry.get(key, 0) + 64,
                             max(0, entry.get(key, 0) - 64), 2**63, -64])
    return f"offset-{entry['name']}.{key}={entry[key]}", join(header, data)


def _encoding(rng: random.Random, raw: bytes) -> tuple[str, bytes]:
    header, data = split(raw)
    entry = _entry(rng, header)
    entry["encoding"] = rng.choice(["raw", "zlib", "runs", "row-delta-runs"])
    if rng.random() < 0.5:
        entry["dtype"] = rng.choice(["<i4", "<i2", "|i1", "<i8", "|b1", "<u4"])
    return f"encoding-{entry['name']}={entry['encoding']}/{entry['dtype']}", join(header, data)


def _contents(rng: random.Random, raw: bytes) -> tuple[str, bytes]:
    """Values inside one array changed, the file re-encoded (valid checksums)."""
    arrays, metadata = _arrays_of(raw)
    name = rng.choice(sorted(arrays))
    array = arrays[name]
    flat = array.reshape(-1)
    what = rng.randrange(6)
    if what == 0 and flat.size:  # a few elements set to interesting values
        for _ in range(rng.randint(1, 3)):
            value = rng.choice([-2, -1, 0, 1, 2, 31, 32, 255, 2**15 - 1, 2**31 - 1, len(flat),
                                len(arrays["finals"]), len(arrays["token_group"])])
            flat[rng.randrange(flat.size)] = np.array(value).astype(flat.dtype)
    elif what == 1 and flat.size:  # bits flipped
        view = flat.view(np.uint8)
        for _ in range(rng.randint(1, 4)):
            view[rng.randrange(view.size)] ^= 1 << rng.randrange(8)
    elif what == 2 and flat.size:  # shuffled
        rng_np = np.random.default_rng(rng.randrange(2**32))
        rng_np.shuffle(flat)
    elif what == 3:  # one element more or less
        if array.ndim == 1:
            array = np.append(array, array[-1:] if len(array) else np.zeros(1, array.dtype)) \
                if rng.random() < 0.5 else array[:-1]
        else:
            array = array[:-1] if rng.random() < 0.5 else np.vstack([array, array[-1:]])
    elif what == 4 and name == "masks":  # bits past the vocabulary, or all bits
        vocab_size = len(arrays["token_group"])
        if vocab_size % 32:
            array[rng.randrange(len(array)), -1] |= np.uint32(1 << (31 - rng.randrange(32 - vocab_size % 32)))
        else:
            array[rng.randrange(len(array))] = 0xFFFFFFFF
    else:  # a constant
        flat[...] = np.array(rng.choice([-1, 0, 1])).astype(flat.dtype)
    arrays[name] = array
    index = Index(IndexArrays(**arrays), metadata)
    return f"contents-{name}-{what}", encode_index(index, compress=rng.random() < 0.5)


def _bytes(rng: random.Random, raw: bytes) -> tuple[str, bytes]:
    """Random bytes of the data changed, both checksums recomputed."""
    header, data = split(raw)
    data = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    if rng.random() < 0.2:
        data = data[:rng.randrange(len(data) + 1)]
    return "bytes", join(header, bytes(data))


def _truncated(rng: random.Random, raw: bytes) -> tuple[str, bytes]:
    return "truncated", raw[:rng.randrange(len(raw))]


MUTATIONS = [(_header_field, 3), (_shape, 3), (_offset, 2), (_encoding, 2), (_contents, 5),
             (_bytes, 2), (_truncated, 1)]


def mutate(rng: random.Random, seeds: list[bytes]) -> tuple[str, bytes]:
    """One mutant: ``(what was done, the file's bytes)``; sometimes two
    mutations stacked."""
    raw = rng.choice(seeds)
    functions, weights = zip(*MUTATIONS)
    labels = []
    for _ in range(1 if rng.random() < 0.8 else 2):
        mutation = rng.choices(functions, weights)[0]
        try:
            label, raw = mutation(rng, raw)
        except (TokenDFAError, Exception):  # an earlier mutation left nothing to parse
            break
        labels.append(label)
    return " + ".join(labels) or "unchanged", raw


# --- the oracle -------------------------------------------------------------------

class Verdict(NamedTuple):
    outcome: str     # "refused", "loaded", or "FINDING"
    detail: str


def judge(path: str, *, verify: bool = True) -> Verdict:
    """Load ``path``: an :class:`IndexFileError`, or an index that is
    consistent throughout; anything else is a finding."""
    try:
        index = Index.load(path, verify=verify)
    except IndexFileError as exc:
        return Verdict("refused", str(exc)[:200])
    except Exception as exc:  # the finding this oracle exists for
        return Verdict("FINDING", f"load raised {type(exc).__name__}: {exc}"[:300])
    try:
        problem = inconsistency(index) if verify else _serve_without_crash(index)
    except Exception as exc:
        return Verdict("FINDING", f"serving raised {type(exc).__name__}: {exc}"[:300])
    return Verdict("FINDING", problem) if problem else Verdict("loaded", "")


def inconsistency(index: Index) -> str | None:
    """The first way ``index`` disagrees with itself, or None: every token of
    every state (the seeds' vocabularies are tiny), mask against advance()."""
    vocab_size = index.vocab_size
    for state in range(index.num_states):
        mask = index.get_mask(state)
        bits = np.unpackbits(mask.view(np.uint8), bitorder="little")
        if bits[vocab_size:].any():
            return f"state {state}'s mask allows ids past the vocabulary"
        for token in range(vocab_size):
            try:
                following = index.advance(state, token)
                accepted = True
            except TokenDFAError:
                accepted = False
            if accepted != bool(bits[token]):
                return f"state {state}, token {token}: mask says {bool(bits[token])}, advance {accepted}"
            if accepted and not 0 <= following < index.num_states:
                return f"state {state}, token {token} leads to unknown state {following}"
        index.forced_tokens(state)
        index.is_final(state)
    return None


def _serve_without_crash(index: Index) -> str | None:
    """Without ``verify`` a mask may disagree with advance(), but serving
    must still only raise tokendfa errors and never read out of bounds."""
    for state in range(min(index.num_states, 64)):
        index.get_mask(state)
        index.forced_tokens(state)
        out = np.zeros(index.get_mask(state).shape[0] + 1, dtype=np.int32)
        index.write_mask_into(state, out)
        for token in range(index.vocab_size):
            try:
                following = index.advance(state, token)
            except TokenDFAError:
                continue
            if not 0 <= following < index.num_states:
                return f"state {state}, token {token} leads to unknown state {following}"
    return None


def write_temporary(raw: bytes, folder: str) -> str:
    descriptor, path = tempfile.mkstemp(suffix=".tdfa", dir=folder)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(raw)
    return path


# --- the committed corpus -----------------------------------------------------------

def regression_mutants() -> list[tuple[str, bytes]]:
    """The forgeries of issue #32 that loaded or raised a foreign exception
    before the loader checked them, written by hand."""
    seed = seed_files()[2]  # the object pattern, compressed
    raw_seed = seed_files()[3]  # the same, every array raw
    found = []

    def entry_change(raw, array, **changes):
        header, data = split(raw)
        next(e for e in header["arrays"] if e["name"] == array).update(changes)
        return join(header, data)

    words = split(raw_seed).header["arrays"]
    words = next(e for e in words if e["name"] == "masks")["shape"][1]
    found.append(("bool-in-shape", entry_change(raw_seed, "masks", shape=[True, words],
                                                nbytes=4 * words, stored_nbytes=4 * words)))
    found.append(("shape-overflows-int64", entry_change(raw_seed, "masks", shape=[2**33, 2**31],
                                                        nbytes=0, stored_nbytes=0)))
    found.append(("misaligned-offset", entry_change(
        raw_seed, "edge_next", offset=next(e for e in split(raw_seed).header["arrays"]
                                           if e["name"] == "edge_next")["offset"] + 4)))
    found.append(("bool-offset", entry_change(raw_seed, "finals", offset=True)))
    found.append(("version-true", join({**split(seed).header, "format_version": True},
                                       split(seed).data)))
    arrays, metadata = _arrays_of(seed)
    past = {k: v.copy() for k, v in arrays.items()}
    past["masks"][:, -1] |= np.uint32(0xFFFFFFFF) << np.uint32(len(arrays["token_group"]) % 32)
    found.append(("mask-bits-past-vocabulary", encode_index(Index(IndexArrays(**past), metadata))))
    everything = {k: v.copy() for k, v in arrays.items()}
    everything["masks"] = np.vstack([everything["masks"], np.full((1, everything["masks"].shape[1]),
                                     (1 << len(arrays["token_group"])) - 1, dtype=np.uint32)])
    everything["mask_id"][0] = len(everything["masks"]) - 1
    found.append(("state-0-offers-everything", encode_index(Index(IndexArrays(**everything), metadata))))
    return found


def corpus_mutants(count: int, seed: int = 0) -> list[tuple[str, bytes]]:
    """``count`` mutants spread over every mutation kind, then the regressions."""
    seeds = seed_files()
    rng = random.Random(seed)
    chosen = []
    kinds = [function for function, _ in MUTATIONS]
    while len(chosen) < count:
        function = kinds[len(chosen) % len(kinds)]
        try:
            label, raw = function(rng, rng.choice(seeds))
        except Exception:
            continue
        chosen.append((label, raw))
    return chosen + regression_mutants()
