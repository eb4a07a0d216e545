"""Which edges close a loop's cycle, edge by edge: what an exported test holds a loop's end to.

mstar keeps a loop's loop-back set as (name, destination) pairs; `simharness.mstar.expect`
decides per edge (its source too), so that a forward edge sharing its pair with an inner loop's
loop-back (docs/findings.md section 7) is still a forward edge.
"""

from __future__ import annotations

from simharness.graph.ir import Edge, Loop, Node, Parallel, Sequential
from simharness.mstar.expect import closes_cycle, loop_back_edges


def _node(name: str, inputs: tuple[str, ...], *outs: tuple[str, str]) -> Node:
    return Node(name, inputs, tuple(Edge(n, to) for n, to in outs))


def test_an_edge_to_an_earlier_part_closes_the_cycle() -> None:
    a = _node("a", ("s1", "in0"), ("y", "b"))
    b = _node("b", ("y",), ("s1", "a"))
    loop = Loop("L1", 2, Sequential((a, b)))
    assert loop_back_edges(loop) == {("b", "s1", "a")}
    assert not closes_cycle(loop.body, "a", "b")


def test_a_forward_edge_sharing_a_pair_with_an_inner_loop_back_is_forward() -> None:
    # the corpus's liveness:hang-seed: a's s2 -> b seeds L2, whose own loop-back is b's s2 -> b
    a = _node("a", ("s1", "in0"), ("s2", "b"))
    inner = Loop("L2", 1, _node("b", ("s2",), ("s2", "b")), outputs=(Edge("s2", "c"),))
    c = _node("c", ("s2",), ("s1", "a"))
    outer = Loop("L1", 1, Sequential((a, inner, c)))
    assert loop_back_edges(outer) == {("b", "s2", "b"), ("c", "s1", "a")}
    assert loop_back_edges(inner) == {("b", "s2", "b")}
    assert ("a", "s2", "b") not in loop_back_edges(outer)


def test_members_of_a_parallel_close_no_cycle() -> None:
    a = _node("a", ("x",), ("y", "b"))
    b = _node("b", ("y",))
    assert not closes_cycle(Parallel((a, b)), "a", "b")
    assert loop_back_edges(Loop("L", 2, Parallel((a, b)))) == frozenset()
