"""Generated split loops: correct runtimes always pass; the pre-fix Rust runtime fails
``loop_exit`` exactly when the loop-back edge leaves the worker graph that finishes the loop."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from simharness.graph.derive import loop_back_pairs
from simharness.placement import Layout
from simharness.run import run_scenario
from tests.helpers import build, checks_failed, node, raw_scenario


@st.composite
def chain_loops(draw):
    n = draw(st.integers(1, 3))
    names = [f"n{i}" for i in range(n)]
    groups = [draw(st.integers(0, 2)) for _ in names]
    self_loop = draw(st.booleans())
    body = []
    for i, name in enumerate(names):
        inputs = ["x"] if i == 0 else [f"y{i}"]
        if i == n - 1 and self_loop and n > 1:
            inputs.append("s")
        # As in mstar's models, the loop's declared output is matched by name to a loop-back
        # edge (combine_cfg's latents -> LLM becomes latents -> vae_decoder at the end).
        outs = [(f"y{i + 1}", names[i + 1])] if i < n - 1 else [("x", names[0])]
        if i == n - 1 and self_loop and n > 1:
            outs.append(("s", name))
        body.append(node(name, inputs, outs))
    loop = {"loop": {"name": "L", "max_iters": draw(st.integers(1, 4)),
                     "body": {"sequential": body}, "outputs": [{"name": "x", "to": "post"}]}}
    walk = {"sequential": [loop, node("post", ["x"], [("done", "client")])]}
    ranks = [draw(st.integers(0, 1)) for _ in range(3)]
    ranks = [r if r <= max(ranks[:i], default=0) + 1 else 0 for i, r in enumerate(ranks)]
    used = sorted(set(groups) | {0})
    node_groups = []
    for g in used:
        members = [nm for nm, gg in zip(names, groups, strict=True) if gg == g]
        if g == 0:
            members.append("post")
        node_groups.append({"node_names": members, "ranks": [ranks[g] if ranks[g] <= 1 else 0]})
    # Ranks must be 0..N-1 without gaps.
    if all(gr["ranks"] == [1] for gr in node_groups):
        node_groups[0]["ranks"] = [0]
    if not any(gr["ranks"] == [0] for gr in node_groups):
        node_groups[0]["ranks"] = [0]
    count = draw(st.integers(1, 3))
    return raw_scenario({"w": walk}, node_groups, requests={"r": {"walks": ["w"]}},
                        workload=[{"request": "r", "count": count,
                                   "concurrency": draw(st.integers(1, count))}])


def _crosses(sc) -> bool:
    """Does the worker graph holding the last body node miss a loop-back destination?"""
    lay = Layout.build(sc)
    facts = sc.walk_facts["w"]
    last = [n for n in facts.nodes if n != "post"][-1]
    wg = lay.by_id[lay.wg_of[("w", last)]]
    pairs = loop_back_pairs(facts.loops["L"])
    return any(dest not in wg.node_names for _, dest in pairs)


@given(chain_loops())
def test_correct_runtimes_pass_and_the_drift_shows_only_when_a_loop_back_crosses(raw):
    sc = build(raw)
    for runtime in ("mstar-python", "mstar-rust"):
        report = run_scenario(sc, runtime)
        assert report.violations == [], [v.message for v in report.violations]
    prefix = run_scenario(sc, "mstar-rust-prefix")
    assert ("loop_exit" in checks_failed(prefix)) == _crosses(sc)
