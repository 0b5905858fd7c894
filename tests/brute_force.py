"""A pure-Python brute force: the slowest, plainest statement of the semantics.

From every reachable state, walk every token byte by byte through the byte
DFA; keep the token when the walk survives. Then drop states from which no
sequence of tokens reaches a final state. No numpy, no grouping, no sharing:
this is what the vectorised reference build and the fast build must equal.
"""

from __future__ import annotations

from tokendfa.analysis.dfa import ByteDFA


def brute_force_transitions(dfa: ByteDFA, tokens) -> dict[int, dict[int, int]] | None:
    """``{dfa state: {token id: next dfa state}}`` or None if nothing can finish."""
    table = dfa.transitions.tolist()
    finals = dfa.finals.tolist()
    edges: dict[int, dict[int, int]] = {}
    frontier = [dfa.initial]
    for state in frontier:
        out = {}
        for token_id, data in enumerate(tokens):
            if not data:
                continue
            current = state
            for byte in data:
                current = table[current][byte]
                if current == 0:
                    break
            if current != 0:
                out[token_id] = current
        edges[state] = out
        for nxt in out.values():
            if nxt not in edges and nxt not in frontier:
                frontier.append(nxt)
    live = {state for state in edges if finals[state]}
    changed = True
    while changed:
        changed = False
        for state, out in edges.items():
            if state not in live and any(nxt in live for nxt in out.values()):
                live.add(state)
                changed = True
    if dfa.initial not in live:
        return None
    kept = {dfa.initial: None}
    order = [dfa.initial]
    result = {}
    for state in order:
        result[state] = {t: n for t, n in edges[state].items() if n in live}
        for nxt in result[state].values():
            if nxt not in kept:
                kept[nxt] = None
                order.append(nxt)
    return result


def assert_index_matches(index, dfa: ByteDFA, expected: dict[int, dict[int, int]], eos_ids) -> None:
    """Walk ``index`` and ``expected`` side by side and compare every state."""
    pairs = {0: dfa.initial}
    order = [0]
    for index_state in order:
        dfa_state = pairs[index_state]
        allowed = expected[dfa_state]
        want = sorted(list(allowed) + (list(eos_ids) if dfa.finals[dfa_state] else []))
        got = index.get_tokens(index_state).tolist()
        assert got == want, f"state {index_state} (dfa {dfa_state}): allowed {got} != {want}"
        assert index.is_final(index_state) == bool(dfa.finals[dfa_state])
        for token_id, dfa_next in allowed.items():
            nxt = index.advance(index_state, token_id)
            if nxt in pairs:
                assert pairs[nxt] == dfa_next, f"state {index_state} token {token_id}"
            else:
                pairs[nxt] = dfa_next
                order.append(nxt)
    assert len(order) == index.num_states, "the index holds states the brute force never reaches"
    assert sorted(set(pairs.values())) == sorted(expected), "reachable state sets differ"
