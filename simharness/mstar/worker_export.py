"""Exports of findings whose mechanism lies in mstar's Worker, around its graph objects.

`simharness.mstar.export` writes a finding of mstar's graph objects as a replay of the calls
into them. A finding of the Worker is written from what the real stack did
(`simharness.mstar.stack_record`, the case run under ``--runtime mstar`` at the seed, or the
searched order of deliveries, its verdict names), as one of two standalone modules:

* **stream buffers**: each rank's ``StreamBuffer`` for the request's stream is made with mstar's
  own class and chunk policy and given, in the order the stack's Workers gave them, every item
  registered, every tensor put, the ``producer_done`` and every pop; at each pop the module
  asserts what a correct stream gives its consumer: a chunk is final only once every item the
  producer sent that rank has arrived, and the ranks of one tensor-parallel instance release the
  same chunks (each runs one lockstep pass per chunk). On mstar-ai 0.2.1 it fails where
  ``producer_done`` overtook an item, or where two ranks of an instance chunked differently.
* **messages**: mstar's own ``Worker._process_message_list`` and ``Worker._remove_request`` on a
  stub worker, as mstar's test/modular/test_worker_message_handling.py stands one, given the
  rank's messages for the request in the order the stack delivered them; it asserts at the end
  that no message stays parked for a request the worker removed. On mstar-ai 0.2.1 it fails on
  the TP REMOVE race.

Either is chosen by what the recording shows (the first buffer pop a correct stream would not
give; a message the run ended with parked for a removed request), not by the case's signature,
so a module exists only where mstar's own objects misbehave in the recorded run.
"""

from __future__ import annotations

import inspect
import textwrap
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simharness.checks.base import and_join
from simharness.mstar.export_text import WIDTH, Exported, describe_runtime, docstring, identifier
from simharness.mstar.export_text import quote as _q
from simharness.mstar.export_text import set_literal as _set
from simharness.mstar.package import PINNED, installed_version
from simharness.mstar.stack_record import BufferCall, MessageCall, StackRecording, record_stack
from simharness.scenario.model import Scenario
from simharness.wording import plural

#: the message kinds a Worker parks for a request it does not know (worker.py:718-736) and the
#: ones that make or end a request there: what a messages module replays
REQUEST_MESSAGES = ("NEW_REQUEST", "REMOVE_REQUEST", "DRAIN_REQUEST", "INPUT_SIGNALS",
                    "STOP_LOOPS")
SOURCES = {0: "MessageSource.CONDUCTOR", 1: "MessageSource.TP_RANK_0", 2: "MessageSource.SELF"}
SOURCE_WORDS = {0: "the conductor's", 1: "its TP leader's", 2: "its own"}


#: the checks whose failure a stream's chunks can cause (a pass too many or too few, a pass
#: waiting in a collective), and those a Worker's message handling can
BUFFER_CHECKS = ("streams", "forwards", "liveness", "tp_agreement", "worker_graphs")
MESSAGE_CHECKS = ("drain",)


def export_worker(sc: Scenario, path: Path) -> Exported | str:
    """The Worker-level module for the case at `path`; where the stack's run of it shows neither
    mechanism for the case's check, what was looked at, in words (module docstring)."""
    meta = sc.corpus
    assert meta is not None
    check = str(meta.check or meta.signature.split(":")[0])
    if check not in BUFFER_CHECKS + MESSAGE_CHECKS:
        return ""
    from simharness.explore.verdict import stack_runs_here

    if not stack_runs_here():
        return ("the real stack, which an export of the Worker's part records, cannot run here "
                "(mstar-ai's worker and conductor do not import)")
    stack_sc, where = stack_case(sc)
    rec = record_stack(stack_sc)
    if check in BUFFER_CHECKS:
        fault = judge_buffers(rec)
        if fault is None and not rec.buffers:
            return f"the real stack's run ({where}) streams nothing"
        if fault is None:
            return f"the real stack's StreamBuffers ({where}) chunked as a correct stream does"
        return BufferModule(rec, fault, path, where).exported()
    kept = kept_after_remove(rec)
    if not kept:
        return f"the real stack's Workers ({where}) let go of every request they were told to remove"
    return MessageModule(rec, min(kept), kept[min(kept)], path, where).exported()


def kept_after_remove(rec: StackRecording) -> dict[int, list[str]]:
    """rank -> the requests it ends the run still holding something of though a REMOVE_REQUEST
    for each reached it: a message parked for it, or its state."""
    removes = {(call.rank, m.rid) for call in rec.messages for m in call.messages
               if m.kind == "REMOVE_REQUEST"}
    out: dict[int, set[str]] = {}
    for rank, items in rec.parked.items():
        out.setdefault(rank, set()).update(rid for rid, _kind in items)
    for rank, rids in rec.left.items():
        out.setdefault(rank, set()).update(r for r in rids if (rank, r) in removes)
    return {rank: sorted(rids) for rank, rids in sorted(out.items()) if rids}


def stack_case(sc: Scenario) -> tuple[Scenario, str]:
    """The run of the case that shows its failure on the real stack, and how to say which: the
    PCT run of the stack's own messages, or the seed, its verdict names."""
    from simharness.explore.search import bare, with_deliveries
    from simharness.explore.verdict import stack_searched
    from simharness.run import with_seed

    meta = sc.corpus
    verdict = meta.verdict if meta is not None and isinstance(meta.verdict, dict) else {}
    if verdict.get("stack_run") is not None and meta is not None:
        # the same search the verdict made (its seed and count of runs), to its first failure
        hit, _why = stack_searched(sc, str(meta.check or meta.signature.split(":")[0]))
        if hit is not None:
            return with_deliveries(bare(sc), hit.moved), f"PCT run {hit.run} of its own messages"
    seed = verdict.get("stack_seed")
    if seed is not None and seed != sc.seed:
        return with_seed(sc, int(seed)), f"seed {seed}"
    return sc, f"seed {sc.seed}"


# -- stream buffers ----------------------------------------------------------------------------


@dataclass
class BufferFault:
    """The first pop a correct stream would not give, and why."""

    #: its position among the recording's buffer calls
    at: int
    #: "early-final" (a final chunk before every item arrived), "instance" (two ranks of one
    #: instance released this chunk differently), or both
    kinds: list[str]
    text: str


def instances(rec: StackRecording) -> dict[tuple[str, int], tuple[int, ...]]:
    """(edge, rank) -> the ranks of the tensor-parallel instance that consumes the stream on that
    rank (instances of one rank only are left out: they agree with themselves)."""
    by_id = rec.layout.by_id
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    for (_src, edge), (_conn, _consumer, wgs) in rec.layout.stream_routes.items():
        for inst in (inst for wg in wgs for inst in by_id[wg].instances if len(inst) > 1):
            for r in inst:
                out.setdefault((edge, r), tuple(inst))
    return out


def chunk_of(call: BufferCall) -> tuple[int, int, list[int], bool]:
    a = call.args
    return a["index"], a["start"], list(a["items"]), bool(a["final"])


def judge_buffers(rec: StackRecording) -> BufferFault | None:
    """The first pop of the recording that breaks what a correct stream gives its consumer."""
    registered: Counter[Any] = Counter()
    released: dict[tuple[str, str, tuple[int, ...]], dict[int, tuple[int, Any]]] = {}
    inst_of = instances(rec)
    for i, call in enumerate(rec.buffers):
        if call.op == "register":
            registered[call.key] += 1
        if call.op != "pop":
            continue
        rank, rid, edge = call.key
        chunk = chunk_of(call)
        index, _start, _items, final = chunk
        kinds, why = [], []
        sent = rec.sent.get(call.key, 0)
        if final and registered[call.key] < sent:
            kinds.append("early-final")
            why.append(f"rank {rank} releases its final chunk (chunk {index}) of {edge} for {rid} "
                       f"when {registered[call.key]} of the {plural(sent, 'item')} the producer "
                       f"sent it have arrived")
        inst = inst_of.get((edge, rank))
        if inst is not None:
            first = released.setdefault((rid, edge, inst), {}).setdefault(index, (rank, chunk))
            if first[1] != chunk:
                kinds.append("instance")
                why.append(f"ranks {first[0]} and {rank} of one tensor-parallel instance release "
                           f"chunk {index} of {edge} differently ({_chunk_words(first[1])}; "
                           f"{_chunk_words(chunk)})")
        if kinds:
            return BufferFault(i, kinds, "; ".join(why))
    return None


def _chunk_words(chunk: tuple[int, int, list[int], bool]) -> str:
    _index, start, items, final = chunk
    what = (f"{'item' if len(items) == 1 else 'items'} "
            f"{', '.join(f'#{n}' for n in items)}") if items else "no item"
    return f"offset {start}, {what}, {'final' if final else 'not final'}"


def _policy_code(spec: Any) -> tuple[str, str]:
    """(mstar's chunk policy class, the expression making one) for one of our policies: the call
    `simharness.mstar.convert.to_chunk_policy` makes, written out."""
    from simharness.mstar.convert import to_chunk_policy

    factory = to_chunk_policy(spec)
    name = factory.func.__name__
    # an argument left at the class's default is left out, as one would write it
    params = inspect.signature(factory.func).parameters
    args = ", ".join(f"{k}={v!r}" for k, v in factory.keywords.items()
                     if k not in params or params[k].default != v)
    return name, f"{name}({args})"


class _Module:
    """What both kinds of module share: the case's words, the installed version, the header."""

    def __init__(self, rec: StackRecording, path: Path, where: str) -> None:
        self.rec = rec
        self.sc = rec.scenario
        self.path = path
        self.where = where
        self.version = installed_version() or PINNED
        meta = self.sc.corpus
        assert meta is not None
        self.meta = meta
        self.verdict = meta.verdict if isinstance(meta.verdict, dict) else {}

    def _intro(self, needs: str) -> list[str]:
        meta = self.meta
        check = str(meta.check or meta.signature.split(":")[0])
        paras = [f"Exported by `simharness export-test` from the corpus case {self.path.name} "
                 f"(signature {meta.signature}, found under {meta.runtime}, "
                 f"{describe_runtime(meta.runtime)}). It needs {needs} alone."]
        if self.verdict.get("text"):
            paras.append(f"Verdict: {self.verdict['text']}.")
        seen = [v.headline or v.message for v in self.rec.violations if v.check == check]
        if seen:
            paras.append(f"What the harness's {check} check saw, under mstar-ai's own Conductor, "
                         f"Workers and StreamBuffers (--runtime mstar, {self.where}): {seen[0]}.")
        return paras

    def _test_name(self) -> str:
        return identifier("test_" + self.sc.name.replace("-", "_").lower())


class BufferModule(_Module):
    """The stream-buffer module for one recording (module docstring)."""

    def __init__(self, rec: StackRecording, fault: BufferFault, path: Path, where: str) -> None:
        super().__init__(rec, path, where)
        self.fault = fault
        self.calls = rec.buffers[:fault.at + 1]
        keys = list(dict.fromkeys(c.key for c in self.calls))
        self.names = {k: identifier(f"rank{k[0]}_{k[1]}_{k[2]}") for k in keys}
        self.policies = {c.edge: c.policy for c in self.sc.connections}
        #: the TP instances of the streams replayed: (edge, ranks), for the module's INSTANCES
        replayed = {(edge, rank) for rank, _rid, edge in keys}
        self.instances = sorted({(edge, ranks) for (edge, rank), ranks in instances(rec).items()
                                 if (edge, rank) in replayed})

    def exported(self) -> Exported:
        summary = f"fails by assertion where mstar's StreamBuffers go wrong: {self.fault.text}"
        return Exported(self.module(), "fail", summary, [])

    def module(self) -> str:
        classes = sorted({_policy_code(self.policies[k[2]])[0] for k in self.names})
        parts = [self._docstring(), "import torch", "",
                 f"from mstar.streaming.chunk_policy import {', '.join(classes)}",
                 "from mstar.streaming.stream_buffer import StreamBuffer", "", "",
                 *self._tables(), "", "", *self._helpers(), "", "", *self._test()]
        return "\n".join(parts).rstrip() + "\n"

    def _docstring(self) -> str:
        paras = self._intro("pytest, torch and mstar-ai")
        paras.append(
            "The test makes each rank's StreamBuffer for the request's stream with mstar's own "
            "StreamBuffer and chunk policy, and gives it, in the order the stack's Workers did, "
            "every item registered as its message arrived (pre_read_register), every tensor put "
            "once read, the producer_done (signal_done) and every pop the Worker's poll made "
            "once has_chunk_ready said a chunk was ready. At each pop it asserts what a correct "
            "stream gives its consumer: a chunk is final only once every item the producer sent "
            "that rank has arrived (SENT, from the stack's run), and the ranks of one "
            "tensor-parallel instance release the same chunks (INSTANCES), since each runs one "
            "lockstep pass per chunk.")
        paras.append(
            f"mstar-ai {self.version} goes wrong at the last pop: {self.fault.text}. "
            f"{self._mechanism()} The test fails there, by assertion; what the stack did after "
            f"it is left out.")
        paras.append(
            "mstar-ai 0.2.1's StreamBuffer is Python (mstar.streaming); it has no Rust "
            "counterpart to run the same calls against.")
        return docstring(f"{self.sc.name}: mstar's StreamBuffers, as the real stack drove them.",
                         f"{self.sc.name}.", paras)

    def _mechanism(self) -> str:
        out = []
        if "early-final" in self.fault.kinds:
            out.append(
                "The Conductor sends producer_done once the producing partition's pass is done "
                "(conductor/conductor.py:1216-1220, 1277-1311), on its own path, while each item "
                "goes from the producer's worker straight to the consumer's; an item whose "
                "message has not arrived is not registered, so the buffer counts it neither in "
                "_num_tensors_registered nor as missing (streaming/stream_buffer.py:73-74) and "
                "closes the stream without it.")
        if "instance" in self.fault.kinds:
            out.append(
                "Each rank of the consuming instance has a StreamBuffer of its own, fed by the "
                "arrival order of its own messages (worker/worker.py:840-860), so the ranks can "
                "cut the stream into different chunks and run different numbers of passes, "
                "while their passes meet in one collective.")
        return " ".join(out)

    def _tables(self) -> list[str]:
        sent = {k: self.rec.sent.get(k, 0) for k in self.names}
        lines = ["#: (rank, request, edge) -> the items the producer sent that rank's buffer, from "
                 "the stack's run",
                 "SENT = {" + ", ".join(f"({k[0]}, {_q(k[1])}, {_q(k[2])}): {n}"
                                         for k, n in sent.items()) + "}"]
        lines += ["#: (edge, ranks): each tensor-parallel instance consuming a stream; its ranks "
                  "run one lockstep",
                  "#: pass per chunk, so they must release the same chunks",
                  "INSTANCES = [" + ", ".join(f"({_q(e)}, {v})" for e, v in self.instances) + "]"]
        return lines

    def _helpers(self) -> list[str]:
        return [
            "class RankBuffer:",
            '    """One rank\'s StreamBuffer for a request\'s stream, and how many items it '
            'registered."""',
            "",
            "    def __init__(self, rank, request_id, edge_name, from_partition, policy):",
            "        self.rank = rank",
            "        self.key = (rank, request_id, edge_name)",
            "        self.buffer = StreamBuffer(request_id=request_id, edge_name=edge_name,",
            "                                   from_partition=from_partition, policy=policy)",
            "        self.registered = 0",
            "",
            "    def register(self, tensor_id):",
            '        """An item\'s message arrived: it takes its place in the stream."""',
            "        self.buffer.pre_read_register(tensor_id)",
            "        self.registered += 1",
            "",
            "    def put(self, tensor_id, n):",
            '        """Its tensor was read: item #n (the producer numbers what it streams)."""',
            "        self.buffer.put(tensor_id, torch.tensor([float(n)]))",
            "",
            "    def pop(self):",
            '        """The Worker\'s poll: (index, offset, items, final) of the next chunk."""',
            "        assert self.buffer.has_chunk_ready()",
            "        chunk = self.buffer.pop_chunk()",
            '        data = chunk.data.get("data")',
            "        items = [] if data is None else [int(x) for x in data.flatten().tolist()]",
            "        return chunk.chunk_index, chunk.start_offset, items, chunk.is_final",
            "", "",
            "def check(buf, chunk, released):",
            '    """What a correct stream gives its consumer, asserted of one chunk `buf` released."""',
            "    index, _offset, _items, final = chunk",
            "    _rank, request_id, edge = buf.key",
            "    sent = SENT.get(buf.key, 0)",
            "    assert not final or buf.registered == sent, (",
            '        f"rank {buf.rank} releases its final chunk (chunk {index}) with {buf.registered} "',
            '        f"of the {sent} items the producer sent it arrived")',
            "    for stream_edge, ranks in INSTANCES:",
            "        if stream_edge == edge and buf.rank in ranks:",
            "            seen = released.setdefault((request_id, edge, ranks), {})",
            "            first_rank, first = seen.setdefault(index, (buf.rank, chunk))",
            "            assert first == chunk, (",
            '                f"ranks {first_rank} and {buf.rank} of one tensor-parallel instance "',
            '                f"release chunk {index} differently: {first} and {chunk} "',
            '                f"(index, offset, items, final)")',
        ]

    def _test(self) -> list[str]:
        doc = "Each pop the stack's Workers made gives what a correct stream gives its consumer."
        lines = [f"def {self._test_name()}():", f'    """{doc}"""', "    released = {}"]
        last = None
        made: set[Any] = set()
        for i, c in enumerate(self.calls):
            v = self.names[c.key]
            rank, rid, edge = c.key
            if c.key != last and c.op != "make":
                lines += ["", f"    # rank {rank}, {rid}'s stream {edge}"]
            last = c.key
            if c.op == "make":
                _cls, policy = _policy_code(self.policies[edge])
                why = (f"{rid}'s NEW_REQUEST for another partition: the Worker makes the buffer "
                       f"for {edge} anew, in place of the first" if c.key in made else
                       f"{rid} arrives; the Worker makes its buffer for {edge}")
                made.add(c.key)
                lines += ["", *(f"    # {part}" for part in textwrap.wrap(
                              f"rank {rank}: {why} (worker.py:447-455)", WIDTH - 6)),
                          f"    {v} = RankBuffer({rank}, {_q(rid)}, {_q(edge)}, "
                          f"{_q(c.args['from'])}, {policy})"]
            elif c.op == "register":
                lines.append(f"    {v}.register({_q(c.args['id'])})  # item #{c.args['item']}'s "
                             f"message arrives")
            elif c.op == "put":
                lines.append(f"    {v}.put({_q(c.args['id'])}, {c.args['item']})")
            elif c.op == "done":
                lines.append(f"    {v}.buffer.signal_done()  # producer_done arrives")
            else:
                words = _chunk_words(chunk_of(c))
                if i == self.fault.at:
                    lines.append(f"    # mstar-ai {self.version} releases chunk {c.args['index']} "
                                 f"here: {words}")
                    lines.append(f"    check({v}, {v}.pop(), released)")
                else:
                    lines.append(f"    check({v}, {v}.pop(), released)  # chunk {c.args['index']}: "
                                 f"{words}")
        return lines


# -- messages ----------------------------------------------------------------------------------


class MessageModule(_Module):
    """The messages module for one rank of one recording (module docstring)."""

    def __init__(self, rec: StackRecording, rank: int, rids: list[str], path: Path,
                 where: str) -> None:
        super().__init__(rec, path, where)
        self.rank = rank
        self.rids = rids
        self.parked = [(rid, kind) for rid, kind in rec.parked.get(rank, []) if rid in rids]
        self.held = [rid for rid in rec.left.get(rank, []) if rid in rids]
        self.calls = self._calls()

    def _calls(self) -> list[MessageCall]:
        out = []
        for call in self.rec.messages:
            if call.rank != self.rank:
                continue
            if call.op == "apply_pending":
                out.append(call)
                continue
            kept = [m for m in call.messages if m.rid in self.rids and m.kind in REQUEST_MESSAGES]
            if kept:
                out.append(MessageCall(call.rank, call.op, call.t, call.in_flight, kept))
        return out

    def exported(self) -> Exported:
        what = []
        if self.parked:
            what.append(and_join([f"{kind} for {rid}" for rid, kind in self.parked]) +
                        " parked for a request it removed")
        if self.held:
            what.append(f"the state of {and_join(self.held)} though a REMOVE reached it")
        summary = f"fails by assertion: worker_{self.rank} ends with {'; and '.join(what)}"
        return Exported(self.module(), "fail", summary, [])

    def module(self) -> str:
        parts = [self._docstring(), "import types", "",
                 "from mstar.utils.ipc_format import (",
                 "    DrainRequest,", "    InputSignals,", "    MessageSource,", "    NewRequest,",
                 "    RemoveRequest,", "    StopLoops,", "    WorkerMessage,",
                 "    WorkerMessageType,", ")",
                 "from mstar.worker.worker import Worker", "", "",
                 *self._tables(), "", "", *self._helpers(), "", "", *self._test()]
        return "\n".join(parts).rstrip() + "\n"

    def _docstring(self) -> str:
        paras = self._intro("pytest and mstar-ai")
        paras.append(
            f"The test stands worker_{self.rank} on a stub, as mstar's own "
            f"test/modular/test_worker_message_handling.py stands a Worker, exposing what "
            f"Worker._process_message_list and Worker._remove_request touch; those two, and "
            f"Worker._apply_pending_removes_safe_to_drop, are mstar's own, bound to the stub. "
            f"NEW_REQUEST makes the request known and replays what was parked for it, as "
            f"Worker._add_new_request ends (worker/worker.py:473-476); the other handlers do "
            f"nothing here. It hands the stub the rank's messages for "
            f"{and_join(self.rids)} in the order the stack delivered them, with the requests of "
            f"the GPU step in flight at each, and asserts at the end what a correct Worker "
            f"leaves once a request's REMOVE_REQUEST has reached it: nothing of the request, "
            f"neither its state nor a message parked for it.")
        paras.append(f"mstar-ai {self.version} fails it. {self._mechanism()}")
        paras.append("mstar-ai 0.2.1's Worker is Python; it has no Rust counterpart to run the "
                     "same messages against.")
        return docstring(f"{self.sc.name}: a Worker's messages, as the real stack delivered them.",
                         f"{self.sc.name}.", paras)

    def _mechanism(self) -> str:
        follower = self.rec.followers.get(self.rank, False)
        kinds = {kind for _rid, kind in self.parked}
        if follower and self.held and not self.parked:
            return ("A TP follower is a property of the worker, not of the request "
                    "(Worker.is_tp_follower, worker/worker.py:294): a follower ignores every "
                    "conductor REMOVE_REQUEST and waits for its TP leader's copy (480-481). This "
                    "request did not use the instance the worker follows in, so no leader "
                    "forwards one (497-512), and the worker keeps the request's state for ever: "
                    "a leak per request.")
        if follower and kinds == {"remove_request"}:
            return ("The conductor sends REMOVE_REQUEST to every rank of the request, and a TP "
                    "leader forwards its own copy to its followers (worker/worker.py:497-512); a "
                    "follower honours the leader's copy only, or its own (480-481), and a copy for "
                    "a request it no longer knows is parked in _unprocessed_messages "
                    "(718-736), where nothing ever takes it: here the leader's copy came first. "
                    "One message leaks per request, in a server that runs for weeks.")
        return ("A message for a request the worker no longer knows is parked in "
                "_unprocessed_messages (worker/worker.py:718-736) until a NEW_REQUEST of that id, "
                "which never comes for a removed request.")

    def _tables(self) -> list[str]:
        groups = {rid: self.rec.groups.get((self.rank, rid), []) for rid in self.rids}
        return ["#: request -> its sharding groups on this worker, (tp_size, this worker's TP rank, "
                "the group's",
                "#: workers), from the stack's run: what _remove_request reads to forward a REMOVE",
                "GROUPS = {" + ", ".join(f"{_q(rid)}: {g!r}" for rid, g in groups.items()) + "}"]

    def _helpers(self) -> list[str]:
        return [
            "def stub_worker(worker_id, is_tp_follower):",
            '    """A Worker on a stub: only what the three methods of mstar\'s it runs touch."""',
            "    stub = types.SimpleNamespace(worker_id=worker_id, is_tp_follower=is_tp_follower)",
            "    stub.removed = []  # the requests _remove_request tore down, in order",
            "    stub.sent = []  # what it sent: the REMOVE a TP leader forwards to its followers",
            "    stub._unprocessed_messages = {}",
            "    stub._in_flight_rids = set()",
            "    stub._pending_removes = set()",
            "    stub._draining_rids, stub._pending_drains, stub._reads_done_sent = set(), set(), set()",
            "    stub._last_active = {}",
            "    stub.streaming_buffers = {}",
            "",
            "    def add_request(body):",
            "        groups = [types.SimpleNamespace(tp_size=size, _tp_rank=rank, _workers=workers)",
            "                  for size, rank, workers in GROUPS.get(body.request_id, [])]",
            "        stub.worker_graphs_manager.per_request_info[body.request_id] = types.SimpleNamespace(",
            "            sharding_config=types.SimpleNamespace(groups=groups))",
            "        # how Worker._add_new_request ends (worker.py:473-476)",
            "        if body.request_id in stub._unprocessed_messages:",
            "            stub._process_message_list(stub._unprocessed_messages[body.request_id])",
            "            del stub._unprocessed_messages[body.request_id]",
            "",
            "    def remove_request(request_id):",
            "        stub.worker_graphs_manager.per_request_info.pop(request_id, None)",
            "        stub.removed.append(request_id)",
            "",
            "    stub.worker_graphs_manager = types.SimpleNamespace(per_request_info={},",
            "                                                       remove_request=remove_request)",
            "    stub.engine_manager = types.SimpleNamespace(remove_request=lambda rid: None,",
            "                                                evictable_nodes=lambda: [])",
            "    stub.tensor_manager = types.SimpleNamespace(force_cleanup_request=lambda rid: None)",
            "    stub.profile_info = types.SimpleNamespace(pop_request=lambda rid: None)",
            "    stub.scheduler = types.SimpleNamespace(clear_rid=lambda rid: None)",
            "    stub.communicator = types.SimpleNamespace(",
            "        send=lambda worker, msg: stub.sent.append((worker, msg)))",
            "    stub._add_new_request = add_request",
            "    for name in (\"_process_message_list\", \"_remove_request\",",
            "                 \"_apply_pending_removes_safe_to_drop\"):",
            "        setattr(stub, name, types.MethodType(getattr(Worker, name), stub))",
            "    for name in (\"_drain_request\", \"_process_new_inputs\", \"_handle_tensor_received\",",
            "                 \"_unpersist_tensors\", \"_stop_loops\", \"_register_tp_follow\",",
            "                 \"_register_tp_nospec\"):",
            "        setattr(stub, name, lambda body: None)",
            "    return stub",
            "", "",
            "def message(kind, body):",
            "    return WorkerMessage(message_type=getattr(WorkerMessageType, kind), body=body)",
            "", "",
            "def new_request(request_id):",
            '    return message("NEW_REQUEST", NewRequest(',
            "        request_id=request_id, partition_worker_graph_ids=[], worker_graph_to_workers={},",
            "        initial_inputs=[], request_info=None))",
            "", "",
            "def remove(request_id, source):",
            '    return message("REMOVE_REQUEST", RemoveRequest(request_id=request_id, source=source))',
            "", "",
            "def drain(request_id, source):",
            '    return message("DRAIN_REQUEST", DrainRequest(request_id=request_id, source=source))',
            "", "",
            "def signals(request_id):",
            '    return message("INPUT_SIGNALS",',
            '                   InputSignals(request_id=request_id, inputs=[], request_info=None))',
            "", "",
            "def stop_loops(request_id):",
            '    return message("STOP_LOOPS", StopLoops(request_id=request_id, loop_names=set(),',
            '                                           partition_name="default"))',
        ]

    def _test(self) -> list[str]:
        follower = self.rec.followers.get(self.rank, False)
        doc = f"worker_{self.rank} keeps nothing of a request once its REMOVE_REQUEST came."
        lines = [f"def {self._test_name()}():", f'    """{doc}"""',
                 f"    worker = stub_worker({_q(f'worker_{self.rank}')}, is_tp_follower={follower})"]
        flight: tuple[str, ...] = ()
        for call in self.calls:
            in_flight = tuple(r for r in call.in_flight if r in self.rids)
            lines.append("")
            if in_flight != flight:
                lines.append(f"    worker._in_flight_rids = {_set(in_flight)}  # the GPU step in "
                             f"flight holds {and_join(list(in_flight)) or 'none of them'}")
                flight = in_flight
            at = f"t={call.t * 1000:.3f} ms"
            if call.op == "apply_pending":
                lines.append(f"    # {at}: the main loop applies the REMOVEs it deferred "
                             f"(worker.py:2782)")
                lines.append(f"    worker._apply_pending_removes_safe_to_drop({_set(call.in_flight)})")
                continue
            words = "; ".join(self._words(m) for m in call.messages)
            lines.append(f"    # {at}: {words}")
            lines.append("    worker._process_message_list([" +
                         ", ".join(self._message(m) for m in call.messages) + "])")
        removed = _set(self.rids)
        lines += ["",
                  f"    # every REMOVE_REQUEST the run delivered to worker_{self.rank} for "
                  f"{and_join(self.rids)} has come",
                  f"    held = sorted(set(worker.worker_graphs_manager.per_request_info) & {removed})",
                  "    assert held == [], (",
                  f'        f"worker_{self.rank} keeps the state of {{held}} for ever: their "',
                  '        f"REMOVE_REQUEST came and was not honoured")',
                  "    parked = {rid: [m.message_type.name for m in messages]",
                  "              for rid, messages in worker._unprocessed_messages.items()",
                  "              if rid in worker.removed}",
                  "    assert parked == {}, (",
                  f'        f"worker_{self.rank} keeps messages parked for ever for requests it '
                  f'removed: {{parked}}")']
        return lines

    @staticmethod
    def _message(m: Any) -> str:
        rid = _q(m.rid or "")
        if m.kind == "NEW_REQUEST":
            return f"new_request({rid})"
        if m.kind == "REMOVE_REQUEST":
            return f"remove({rid}, {SOURCES.get(m.source, 'MessageSource.CONDUCTOR')})"
        if m.kind == "DRAIN_REQUEST":
            return f"drain({rid}, {SOURCES.get(m.source, 'MessageSource.CONDUCTOR')})"
        if m.kind == "INPUT_SIGNALS":
            return f"signals({rid})"
        return f"stop_loops({rid})"

    @staticmethod
    def _words(m: Any) -> str:
        kind = m.kind.lower().replace("_", " ")
        source = f" ({SOURCE_WORDS[m.source]} copy)" if m.source in SOURCE_WORDS else ""
        known = "known here" if m.known else "not known here"
        return f"{kind} for {m.rid}{source}, {known}"


__all__ = ["BufferFault", "BufferModule", "MessageModule", "export_worker", "judge_buffers",
           "stack_case"]
