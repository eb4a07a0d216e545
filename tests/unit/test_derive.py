"""Loop I/O derivation, against the sets mstar computes (reference/mstar_semantics.md 1.3)."""

from simharness.graph.analysis import WalkFacts
from simharness.graph.derive import loop_back_pairs, loop_external_inputs, section_io
from simharness.graph.ir import Edge, Loop, Node, Parallel, Sequential
from simharness.scenario import load_scenario


def test_bagel_cfg_loop_has_eight_loop_back_pairs_and_no_external_input(scenarios_dir):
    sc = load_scenario(scenarios_dir / "bagel_cfg.yaml")
    loop = sc.walk_facts["image_gen_cfg"].loops["denoise"]
    assert loop_external_inputs(loop) == frozenset()
    assert loop_back_pairs(loop) == {
        (sig, dest)
        for sig in ("latents", "time_index")
        for dest in ("LLM", "LLM_cfg_text", "LLM_cfg_img", "combine_cfg")
    }


def test_decode_loop_self_edge_is_loop_back():
    llm = Node("LLM", ("text_inputs",), (Edge("new_token", "client"), Edge("text_inputs", "LLM")))
    loop = Loop("decode_loop", 2048, llm)
    assert loop_back_pairs(loop) == {("text_inputs", "LLM")}
    assert loop_external_inputs(loop) == frozenset()


def test_external_input_of_a_denoise_body_stays_external():
    # The reference's verified example: dit has inputs emb (external), latents and t (loop-back).
    dit = Node("dit", ("emb", "latents", "t"), (Edge("latents", "dit"), Edge("t", "dit")))
    loop = Loop("denoise", 3, dit, outputs=(Edge("latents", "vae"),))
    assert loop_external_inputs(loop) == {("emb", "dit")}
    assert loop_back_pairs(loop) == {("latents", "dit"), ("t", "dit")}


def test_parallel_member_fed_from_outside_stays_external():
    a = Node("a", ("x",), (Edge("y", "b"),))
    b = Node("b", ("y", "z"), ())
    io = section_io(Parallel((a, b)))
    assert io.ext_inputs == {("x", "a"), ("z", "b")}
    assert io.ext_outputs == ()


def test_sequential_backward_edge_is_loop_back_and_leaves_the_outputs():
    a = Node("a", ("x",), (Edge("y", "b"),))
    b = Node("b", ("y",), (Edge("x", "a"), Edge("out", "client")))
    io = section_io(Sequential((a, b)))
    assert io.loop_back == {("x", "a")}
    assert io.ext_inputs == frozenset()
    assert [e.pair for e in io.ext_outputs] == [("out", "client")]


def test_walk_seeds_are_loop_back_pairs_nothing_upstream_sends():
    pre = Node("pre", ("p",), (Edge("x", "a"),))
    a = Node("a", ("x",), (Edge("x", "a"), Edge("o", "client")))
    facts = WalkFacts("w", Sequential((pre, Loop("L", 2, a))))
    # (x, a) is a loop-back pair, but `pre` sends its first copy: no seed from the conductor.
    assert facts.seeds == frozenset()
    assert facts.start_inputs == {("p", "pre")}
    alone = WalkFacts("w", Loop("L", 2, a))
    assert alone.seeds == {("x", "a")}


def test_counter_sequence_of_nested_loops():
    den = Node("den", ("z",), (Edge("z", "den"),))
    ref = Node("ref", ("z",), (Edge("z", "den"),))
    outer = Loop("outer", 2, Sequential((Loop("inner", 3, den), ref)))
    facts = WalkFacts("w", outer)
    assert facts.iterations("den") == 6
    assert facts.counter_sequence("den") == [0, 1, 2, 0, 1, 2]
    assert facts.counter_sequence("ref") == [0, 1]
    # A dynamic stop shortens a loop: the drawn count replaces max_iters where given.
    assert facts.counter_sequence("den", {"inner": 2}) == [0, 1, 0, 1]
    assert facts.counter_sequence("den", {"outer": 1}) == [0, 1, 2]


def test_a_nested_inner_loop_fed_back_only_after_it_needs_a_walk_start_seed():
    """mstar's test_nested_loops: refiner sends latents back to denoiser, but only after the
    inner loop ran; the first copy must come from the walk's start. A sender before the inner
    loop feeds it instead."""
    from simharness.graph.analysis import WalkFacts
    from simharness.graph.ir import Edge, Loop, Node, Sequential

    denoise = Loop("denoise", 3, Node("denoiser", ("latents",), (Edge("latents", "denoiser"),)),
                   outputs=(Edge("latents", "refiner"),))
    refiner = Node("refiner", ("latents",), (Edge("latents", "denoiser"),))
    walk = Loop("refine", 2, Sequential((denoise, refiner)), outputs=())
    assert ("latents", "denoiser") in WalkFacts("w", walk).seeds
    feeder = Node("feeder", ("x",), (Edge("latents", "denoiser"),))
    walk2 = Loop("refine", 2, Sequential((feeder, denoise, refiner)), outputs=())
    assert ("latents", "denoiser") not in WalkFacts("w", walk2).seeds
