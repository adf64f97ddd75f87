"""torch.compile(model, backend="cuxla"): PyTorch graphs run by XLA.

Dynamo hands each graph to AOTAutograd, which decomposes it to core ATen ops
(PyTorch's own tables; attention to cuxla's fused pair, `_attention`) and
gives a forward and (when training) a backward graph. Each graph becomes one
XLA program when every op lowers: traced to StableHLO through torchax and JAX
without touching a JAX device, compiled by cuxla's own PJRT client, run
through `cuxla.torch.call`, so its inputs and outputs are handed over
zero-copy. A whole graph compiles in the background: a training graph's
backward is lowered while XLA compiles its forward, and the two compile at
once; the first call waits. Ops that cannot run in XLA (no lowering, a
lowering that raises, a dtype XLA lacks) split the graph: groups of the
others become programs, the rest runs in eager PyTorch. A graph nothing
lowers runs in eager PyTorch.
What ran where, and why, is in `report()` and logged on "cuxla.dynamo".

Random ops run in XLA, drawn from a seed that PyTorch's generator gives
each call (so `torch.manual_seed` repeats a run, with other numbers than
eager PyTorch's); `fallback_random = True` keeps them in PyTorch instead.
"""
from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import hashlib
import json
import logging
import operator
import os
import pathlib
import pickle
import sys
import threading
import time
from typing import Any, Callable, Sequence

import torch
import torch.fx
import torch.utils._pytree as pytree
from functorch.compile import make_boxed_func
from torch._decomp import core_aten_decompositions
from torch._functorch import config as functorch_config
from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch._inductor.output_code import OutputCode
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupport
from torch.utils._python_dispatch import _disable_current_modes

import cuxla

from . import _attention, _attention_masks, _lowerings, _torchax
from ._errors import one_line
from . import torch as cuxla_torch

log = logging.getLogger("cuxla.dynamo")

fallback_random = False
"""True: random ops run in PyTorch, drawing eager PyTorch's numbers bit for
bit (the graph is split around them). Read when a graph is compiled."""


def _programs_asked(variable: str) -> int:
    said = os.environ.get(variable, "") or "1"
    if not said.isdigit() or int(said) < 1:
        raise ValueError(f"{variable}={said!r} is not a whole number of programs, 1 or more")
    return int(said)


forward_programs = _programs_asked("CUXLA_FORWARD_PROGRAMS")
"""How many XLA programs a graph's forward (an inference graph's too) runs
as, cut as the backward's are (`CUXLA_FORWARD_PROGRAMS`, 1 unless set). The
host hands PJRT every argument and output buffer of a program before the
program's first kernel runs (on an H100 about 2.7 µs a buffer, a model's
weights and the activations it saves): in several programs the device runs
the first while the host hands over the next one's. Read when a graph is
compiled."""

backward_programs = _programs_asked("CUXLA_BACKWARD_PROGRAMS")
"""How many XLA programs a training graph's backward runs as, one after
another, its ops cut in their order into runs of about equal length
(`CUXLA_BACKWARD_PROGRAMS`, 1 unless set). One program holds, for its whole
run, every activation the forward saved, every gradient it writes and all
its scratch; in several, each value is let go after the last program that
reads it, and each program's gradients and scratch are its own: less memory
at once, at the cost of more programs to launch and no fusion across the
cuts. Read when a graph is compiled."""

compile_backward_with_forward = True
"""True: a training graph's backward is compiled right after its forward
(while XLA compiles the forward, the two at once); False: at the first
backward call, as AOTAutograd does by default. Read when a graph is compiled."""

time_on_device = False
"""True: each XLA program called on a GPU is also timed on the device, by
CUDA events on PyTorch's stream around it (from its inputs being ready to
its outputs being made), summed in report()["device_s"], which then waits
for the calls timed so far. Two events per call. Read at each call."""

_RANDOM_TAG = torch.Tag.nondeterministic_seeded

_lock = threading.Lock()
_fallbacks: collections.Counter[tuple[str, str]] = collections.Counter()
_STATS = {"graphs": 0, "xla_programs": 0, "aten_ops": 0, "xla_ops": 0, "lowerings_from_cache": 0,
          "graphs_from_aot_autograd_cache": 0, "backwards_without_zeros": 0, "aot_autograd_s": 0.0,
          "lowering_s": 0.0, "compile_s": 0.0,
          "program_calls": 0, "call_s": 0.0, "device_s": 0.0, "largest_xla_scratch_bytes": 0,
          "largest_xla_program_bytes": (0, 0, 0)}
_stats = dict(_STATS)
# (start, end) CUDA events of the calls timed on the device, not yet summed.
_device_timings: collections.deque = collections.deque()
_summing_lock = threading.Lock()
_epoch = 0  # reset_report()s so far: a share recorded before one is not taken back after it


class _Counting(threading.local):
    """Whether this thread's compiles count as graphs and XLA programs of
    their own in the report (not while compiling a variant of a graph that
    counts already: `_MissingTangents`)."""
    graphs = True


_counting = _Counting()


class _CompilerTime(threading.local):
    """This thread's seconds in cuxla's graph compiler, which AOTAutograd's own time leaves out."""
    seconds = 0.0


_in_compiler = _CompilerTime()


def report() -> dict[str, Any]:
    """What the backend did so far: graphs compiled (and how many of them
    AOTAutograd's cache gave), XLA programs made, ATen ops in those graphs
    and how many of them run in XLA, AOTAutograd's time
    (tracing the forward and backward, decomposing, partitioning), cuxla's
    time lowering and XLA's compiling, the largest scratch memory XLA
    planned for a program's execution, the memory plan of the program that
    needs the most (its arguments, outputs and scratch, in use at once while
    it runs), the programs' calls and the host's time in them (handing
    over and launching; XLA's device work runs on after), their time on the
    device (under `time_on_device`), the backwards compiled again for
    outputs that got no gradient (`_MissingTangents`; neither graphs nor
    programs of their own here), Dynamo's graph breaks (the model's
    Python cut between graphs, under any backend), and every op that runs in
    PyTorch, with why."""
    _sum_device_timings(wait=True)
    breaks = torch._dynamo.utils.counters["graph_break"]  # Dynamo's own cuts: between graphs PyTorch runs
    with _lock:
        return {
            **_stats,
            "graph_breaks": sum(breaks.values()),
            "graph_break_reasons": [{"reason": why.splitlines()[0], "count": n} for why, n in breaks.most_common()],
            "fallbacks": [{"op": op, "reason": why, "count": n} for (op, why), n in _fallbacks.items()],
        }


def reset_report() -> None:
    global _epoch
    with _lock:
        _epoch += 1
        _fallbacks.clear()
        _stats.update(_STATS)
        _device_timings.clear()
        torch._dynamo.utils.counters["graph_break"].clear()


def _sum_device_timings(wait: bool) -> None:
    """Adds the device time of the timed calls that are done (with `wait`,
    of all, waiting for them) to the report."""
    with _summing_lock:  # one at a time: each call's time is added once
        with _lock:
            timings, epoch = list(_device_timings), _epoch
        done, settled = 0.0, 0
        for started, ended in timings:
            if wait:
                ended.synchronize()
            elif not ended.query():
                break
            done += started.elapsed_time(ended) / 1e3
            settled += 1
        with _lock:
            if epoch == _epoch:  # else reset_report() dropped them meanwhile
                for _ in range(settled):
                    _device_timings.popleft()
                _stats["device_s"] += done


def _record(ops: int, xla_ops: int, kept: dict[str, tuple[str, str]], graphs: int = 1,
            xla_programs: int = 0) -> None:
    """One compiled graph's share in the report (`kept`: node -> (op, why));
    negative counts take back a share recorded before."""
    if not _counting.graphs:
        return
    with _lock:
        _stats["graphs"] += graphs
        _stats["xla_programs"] += xla_programs
        _stats["aten_ops"] += ops
        _stats["xla_ops"] += xla_ops
        for (op, reason), n in collections.Counter(kept.values()).items():
            _fallbacks[(op, reason)] += n
    for op, reason in set(kept.values()):
        log.info("falls back to PyTorch: %s (%s)", op, reason)


@functools.cache
def _decompositions() -> dict:
    table = core_aten_decompositions()
    table.update(_attention.DECOMPOSITIONS)
    # An op cuxla lowers itself reaches the lowering whole: decomposed first, it
    # would lose what the lowering is for (PyTorch's numbers, or a buffer or pass
    # XLA need not spend: _lowerings' docstring).
    for op in _lowerings.lowerings():
        table.pop(op, None)
    return table


def _static_shape(t: torch.Tensor) -> bool:
    """Whether every dimension of `t` is a number (none symbolic)."""
    return all(isinstance(d, int) for d in t.shape)


def _tensor_meta(node: torch.fx.Node) -> list[torch.Tensor]:
    value = node.meta.get("val")
    values = value if isinstance(value, (list, tuple)) else [value]
    return [v for v in values if isinstance(v, torch.Tensor)]


def _is_random(node: torch.fx.Node) -> bool:
    return isinstance(node.target, torch._ops.OpOverload) and _RANDOM_TAG in node.target.tags


def _why_not(node: torch.fx.Node) -> str | None:
    """None when XLA can run `node`, else the reason it cannot."""
    target = node.target
    if fallback_random and _is_random(node):
        return "random op: kept in PyTorch (cuxla.dynamo.fallback_random)"
    if not _torchax.has_lowering(target):
        return "no lowering"
    if target is torch.ops.aten.as_strided.default and not _reads_own_storage(node.args[0].meta["val"]):
        return "as_strided on a tensor that is not a dense block of its storage"
    if target is torch.ops.aten._to_copy.default and _moves_to_the_cpu(node):
        # A program's outputs are on its device: what the graph wants on the CPU PyTorch copies there.
        return "a copy from the device to the CPU"
    value = node.meta.get("val")
    values = value if isinstance(value, (list, tuple)) else [value]
    # None: an output not asked for (a gradient nothing needs).
    if not any(isinstance(v, torch.Tensor) for v in values) or \
            any(v is not None and not isinstance(v, torch.Tensor) for v in values):
        return "produces a non-tensor value"
    for arg in node.all_input_nodes:
        for t in _tensor_meta(arg):
            if str(t.dtype).removeprefix("torch.") not in cuxla._cuxla.DTYPES:
                return f"dtype {t.dtype} has no XLA counterpart"
    if not all(_static_shape(t) for n in (node, *node.all_input_nodes) for t in _tensor_meta(n)):
        return "symbolic shapes (dynamic=True, or Dynamo's automatic dynamic shapes): cuxla lowers static shapes"
    return None


def _moves_to_the_cpu(node: torch.fx.Node) -> bool:
    source, made = node.args[0].meta.get("val"), node.meta.get("val")
    return (isinstance(source, torch.Tensor) and isinstance(made, torch.Tensor) and source.device.type != "cpu"
            and made.device.type == "cpu")


class _Supported(OperatorSupport):
    """XLA runs what `_why_not` allows and what did not fail to lower in
    this graph (`ruled_out`: node name -> reason); `kept` holds the reasons
    for the rest (node name -> (op, reason))."""

    def __init__(self, ruled_out: dict[str, str]):
        super().__init__()
        self.ruled_out = ruled_out
        self.kept: dict[str, tuple[str, str]] = {}

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        if not _is_aten_op(node):
            return node.target is operator.getitem
        reason = self.ruled_out.get(node.name) or _why_not(node)
        if reason is not None:
            self.kept[node.name] = (str(node.target), reason)
        return reason is None


class _XlaProgram:
    """One graph (or partition) traced to StableHLO and compiled by cuxla.
    A graph with random ops takes one more input, the seed of its draws.

    With `if_compile_fails`, XLA compiles in the background and the first
    call waits for it; should that compile fail, `if_compile_fails(error)`
    gives what runs the graph instead. Without it, XLA compiles now and a
    failure raises."""

    def __init__(self, gm: torch.fx.GraphModule, inputs: Sequence[torch.Tensor], count: bool = True,
                 if_compile_fails: Callable[[Exception], Callable] | None = None):
        env = _torchax.environment()
        import jax

        gm = _copy(gm)
        _torchax.drop_device_moves(gm)
        self.device = _device_of(gm, inputs)
        # Inputs on another device (a CPU scalar beside CUDA tensors, which
        # PyTorch's ops accept) are moved to the program's at each call.
        self.moved = [i for i, t in enumerate(inputs) if t.device != self.device]
        # Real tensors even where the compiler is called under a fake mode
        # (the move to the device would make fake ones).
        with torch._subclasses.fake_tensor.unset_fake_temporarily():
            constants = [c.to(self.device) for c in _constants_as_inputs(gm)]
        # XLA arrays once (a view each, or an empty buffer), not an import per call.
        self.constants = [cuxla.from_dlpack(c) for c in constants]
        # Outputs that are inputs, or inputs reshaped (what the forward saves
        # for the backward), are made in PyTorch at each call, as eager makes
        # them: views sharing the input's memory, not copies written by XLA.
        input_views = _views_of_inputs(gm, len(inputs))
        inputs = [*inputs, *constants]
        self.random = any(_is_random(n) for n in gm.graph.nodes if n.op == "call_function")

        def run_graph(*jax_args):
            seeded = contextlib.nullcontext()
            if self.random:
                *jax_args, seed = jax_args
                seeded = env.override_property(prng=jax.random.PRNGKey(seed))
            # An empty input has no data to read: the program makes its own,
            # so that XLA never copies 0 bytes from a parameter (a copy node
            # of no bytes is one CUDA graphs refuse).
            jax_args = [jax.numpy.zeros(a.shape, a.dtype) if a.size == 0 else a for a in jax_args]
            with env, seeded:
                outputs = gm(*env.j2t_iso(tuple(jax_args)))
            outputs = outputs if isinstance(outputs, (list, tuple)) else (outputs,)
            # In PyTorch's dtypes: a lowering may give another (JAX's top_k
            # gives int32 indices where PyTorch's are int64).
            return [None if o is None or i in input_views else o if want is None else o.astype(want)
                    for i, (o, want) in enumerate(zip(env.t2j_iso(tuple(outputs)), out_dtypes))]

        out_dtypes = [_torchax.jax_dtype(t.dtype) if isinstance(t, torch.Tensor) else None
                      for t in _output_values(gm)]
        specs = [jax.ShapeDtypeStruct(tuple(t.shape), _torchax.jax_dtype(t.dtype)) for t in inputs]
        if self.random:
            specs.append(jax.ShapeDtypeStruct((), jax.numpy.int64))
        platform = "cuda" if self.device.type == "cuda" else "cpu"
        start = time.perf_counter()
        cache_key = _lowering_key(gm, inputs, out_dtypes, sorted(input_views), platform)
        cached = _lowered_from_cache(cache_key)
        if cached is not None:
            program, self.out_slots = cached
        else:
            with _torchax.lowering_context(platform):
                # keep_unused: the program takes every input the graph is called with.
                lowered = jax.jit(run_graph, keep_unused=True).trace(*specs).lower(lowering_platforms=(platform,))
                taken = _arguments_taken(lowered)
                if taken != len(specs):  # a lowering that leaked a value of an inner JAX trace hoists it
                    raise ValueError(f"the lowered program takes {taken} arguments for the graph's {len(specs)}")
                program = lowered.as_text()
                # Outputs that are not tensors (None gradients) or are made
                # from inputs in PyTorch are not in the program: remember
                # where they go.
                self.out_slots = [o is not None for o in lowered.out_info]
            cuxla._cuxla.compile_cache_store(cache_key, json.dumps([program, self.out_slots]).encode())
        # What a later process needs to run this program without its graph.
        self.record = {"lowering_key": cache_key, "platform": platform, "device": str(self.device),
                       "moved": self.moved, "constants": constants, "random": self.random,
                       "input_views": input_views}
        self._start(program, platform, input_views, count, if_compile_fails, cached is not None, start)

    @classmethod
    def from_record(cls, record: dict, if_compile_fails: Callable[[Exception], Callable]) -> "_XlaProgram | None":
        """The program `record` describes, its lowering from the disk cache;
        None where that lowering is gone (the graph is then compiled again)."""
        start = time.perf_counter()
        cached = _lowered_from_cache(record["lowering_key"])
        if cached is None:
            return None
        program, out_slots = cached
        self = cls.__new__(cls)
        self.out_slots, self.record = out_slots, record
        self.device, self.moved, self.random = torch.device(record["device"]), record["moved"], record["random"]
        self.constants = [cuxla.from_dlpack(c) for c in record["constants"]]
        self._start(program, record["platform"], record["input_views"], True, if_compile_fails, True, start)
        return self

    def _start(self, program: str, platform: str, input_views: dict, count: bool,
               if_compile_fails: Callable[[Exception], Callable] | None, from_cache: bool, start: float) -> None:
        """XLA compiles `program`, now or in the background."""
        lowered_at = time.perf_counter()
        # Per output: made by the program, a view of an input, or None (not a tensor).
        self.output_plan = [_FROM_PROGRAM if slot else input_views.get(i) for i, slot in enumerate(self.out_slots)]
        self.executable = None  # until XLA's compile is done
        self._instead: Callable | None = None  # what runs the graph where XLA's compile failed
        if if_compile_fails is None:
            self.executable = _xla_compile(program, platform, count)
        else:
            self._compiling = _compile_threads().submit(_xla_compile, program, platform, count)
            self._if_compile_fails = if_compile_fails
            self._first_call_lock = threading.Lock()
        if count:
            with _lock:
                if _counting.graphs:
                    _stats["xla_programs"] += 1
                    _stats["lowerings_from_cache"] += from_cache
                _stats["lowering_s"] += lowered_at - start

    def _first_call(self, args: tuple) -> list[torch.Tensor | None]:
        """Waits for XLA's compile; where it failed, what replaces the program runs."""
        with self._first_call_lock:
            if self.executable is None and self._instead is None:
                try:
                    self.executable = self._compiling.result()
                except Exception as error:
                    self._instead = self._if_compile_fails(error)
                    self.constants = []  # the program's own, on the device: what replaces it has its own
                # Not needed again: they hold the graph, and a failure's traceback.
                self._if_compile_fails = self._compiling = None
        return self._instead(*args) if self._instead is not None else self(*args)

    def __call__(self, *args: torch.Tensor) -> list[torch.Tensor | None]:
        if self.executable is None:
            return self._first_call(args)
        start = time.perf_counter()
        given = args
        if self.moved:
            args = list(args)
            for i in self.moved:
                args[i] = args[i].to(self.device, non_blocking=True)
        args = (*args, *self.constants)
        if self.random:
            # PyTorch's generator for the device gives the seed: manual_seed repeats the draws.
            args = (*args, torch.randint(0, 2**62, (), dtype=torch.int64, device=self.device))
        timed = time_on_device and self.device.type == "cuda"
        if timed:
            stream = torch.cuda.current_stream(self.device)
            started, ended = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            started.record(stream)
        produced = iter(cuxla_torch.call(self.executable, *args))
        if timed:
            ended.record(stream)
        outputs = [next(produced) if how is _FROM_PROGRAM else None if how is None else _input_view(given, *how)
                   for how in self.output_plan]
        with _lock:  # the host's share of a step: launching XLA's work, not waiting for it
            _stats["program_calls"] += 1
            _stats["call_s"] += time.perf_counter() - start
            if timed:
                _device_timings.append((started, ended))
                pending = len(_device_timings)
        if timed and pending > 1024:  # timed calls nobody asked about yet: sum those done
            _sum_device_timings(wait=False)
        return outputs


@functools.cache
def _compile_threads() -> concurrent.futures.ThreadPoolExecutor:
    """Where XLA compiles in the background (cuxla.compile lets go of the GIL)."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="cuxla-compile")


def _xla_compile(program: str, platform: str, count: bool) -> "cuxla.Executable":
    """XLA compiles the StableHLO (its time and scratch memory in the report unless `count` is False)."""
    start = time.perf_counter()
    executable = cuxla.compile(program, client=platform)
    if count:
        sizes = executable.memory_sizes() or {}
        plan = (sizes.get("arguments", 0), sizes.get("outputs", 0), sizes.get("scratch", 0))
        with _lock:
            _stats["compile_s"] += time.perf_counter() - start
            _stats["largest_xla_scratch_bytes"] = max(_stats["largest_xla_scratch_bytes"], plan[2])
            _stats["largest_xla_program_bytes"] = max(_stats["largest_xla_program_bytes"], plan, key=sum)
    return executable


def _lowering_key(gm: torch.fx.GraphModule, inputs: Sequence[torch.Tensor], out_dtypes: list,
                  left_out: list[int], platform: str) -> bytes:
    """What a graph's StableHLO follows from: the graph's code (its ops and
    their arguments), the function each op lowers by, its inputs' shapes,
    dtypes and strides, its outputs' dtypes and those left out of the
    program, the platform, its matmul precision and attention, the versions
    of PyTorch, JAX and torchax, and the source of cuxla's own lowering code."""
    import jax
    import torchax  # imported already: the lowering context made its environment

    versions = [_lowering_source_digest(), torch.__version__, jax.__version__, torchax.__version__,
                _torchax.matmul_precision(platform), _attention.implementation(platform)]
    lowerings = sorted({_torchax.lowering_name(n.target) for n in gm.graph.nodes if _is_aten_op(n)})
    described = [platform, *versions, gm.code, lowerings,
                 [(tuple(t.shape), str(t.dtype), tuple(t.stride())) for t in inputs], [str(d) for d in out_dtypes],
                 left_out]
    return b"cuxla: torch.compile graph lowered to StableHLO\0" + hashlib.sha256(
        json.dumps(described).encode()).hexdigest().encode()


@functools.cache
def _lowering_source_digest() -> str:
    """A digest of the modules that turn a graph into StableHLO: a lowering
    cached by other code (another cuxla, an edited one) is not taken."""
    from . import _lowerings

    digest = hashlib.sha256()
    for module in (sys.modules[__name__], _torchax, _lowerings, _attention, _attention_masks):
        digest.update(pathlib.Path(module.__file__).read_bytes())
    return digest.hexdigest()


def _lowered_from_cache(key: bytes) -> tuple[str, list[bool]] | None:
    """The StableHLO and output slots a process before lowered for `key`."""
    entry = cuxla._cuxla.compile_cache_load(key)
    if entry is None:
        return None
    program, out_slots = json.loads(entry)
    return program, out_slots


def _constants_as_inputs(gm: torch.fx.GraphModule) -> list[torch.Tensor]:
    """Turns the graph's tensor constants into inputs after its own, and
    returns them: a constant traced into the program would be a host value
    (and JAX would make a device to hold it); as an input it is handed over
    zero-copy at each call (once on the program's device)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    constants = []
    for node in [n for n in gm.graph.nodes if n.op == "get_attr"]:
        value = _attribute(gm, node.target)
        if not isinstance(value, torch.Tensor):
            continue
        anchor = placeholders[-1] if placeholders else None
        with gm.graph.inserting_after(anchor) if anchor is not None else gm.graph.inserting_before(None):
            placeholder = gm.graph.placeholder(f"constant_{len(constants)}")
        placeholder.meta["val"] = value
        node.replace_all_uses_with(placeholder)
        gm.graph.erase_node(node)
        placeholders.append(placeholder)
        constants.append(value)
    if constants:
        gm.recompile()
    return constants


def _device_of(gm: torch.fx.GraphModule, inputs: Sequence[torch.Tensor]) -> torch.device:
    """The device a graph runs on: an accelerator any of its tensors is on
    (CPU scalars go along with CUDA tensors), else the CPU."""
    values = [*inputs, *(t for node in gm.graph.nodes for t in _tensor_meta(node))]
    return next((t.device for t in values if t.device.type != "cpu"), torch.device("cpu"))


def _is_view_op(target: Any) -> bool:
    """Whether an ATen op returns a view of its first argument's memory."""
    returns = getattr(getattr(target, "_schema", None), "returns", ())
    alias = returns[0].alias_info if len(returns) == 1 else None
    return alias is not None and not alias.is_write


_FROM_PROGRAM = object()  # an output the XLA program makes


def _views_of_inputs(gm: torch.fx.GraphModule, inputs: int) -> dict[int, tuple[int, tuple[int, ...] | None]]:
    """Output position -> (input position, shape) for the outputs that are
    one of the graph's first `inputs` inputs (shape None: the input itself),
    or views of all of one that are contiguous and start where it does (a
    reshape; a transpose transposed back), which PyTorch makes by `view`. (A
    transposed or sliced view would be copied before a program reads it:
    such outputs are better made by XLA, in one program.)"""
    placeholders = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder") if i < inputs}
    views = {}
    for position, made in enumerate(_output_args(gm)):
        _, node = _view_chain(made)
        if node not in placeholders:
            continue
        if node is made:
            views[position] = (placeholders[node], None)
        elif (_contiguous(node) and _contiguous(made) and _static_shape(made.meta["val"])
              and made.meta["val"].storage_offset() == node.meta["val"].storage_offset()
              and made.meta["val"].numel() == node.meta["val"].numel()):
            views[position] = (placeholders[node], tuple(made.meta["val"].shape))
    return views


def _input_view(given: Sequence[torch.Tensor], position: int, shape: tuple[int, ...] | None) -> torch.Tensor:
    return given[position] if shape is None else given[position].view(shape)


def _contiguous(node: torch.fx.Node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.is_contiguous()


def _output_args(gm: torch.fx.GraphModule) -> list:
    """What the graph returns, in order (nodes, or constants such as None)."""
    values = gm.graph.output_node().args[0]
    return list(values) if isinstance(values, (list, tuple)) else [values]


def _output_values(gm: torch.fx.GraphModule) -> list:
    """The graph's outputs as traced (tensors, None for an output that is not one)."""
    return [v.meta.get("val") if isinstance(v, torch.fx.Node) else None for v in _output_args(gm)]


def _example_values(gm: torch.fx.GraphModule) -> list:
    return [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]


def _is_aten_op(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target is not operator.getitem


def _aten_ops(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if _is_aten_op(n)]


def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
    """AOTAutograd's forward (and inference) compiler: one XLA program when
    every op lowers (`forward_programs` in turn if more than one), XLA
    programs and eager PyTorch otherwise, eager PyTorch when nothing lowers;
    called with boxed arguments (one list). Never raises for a graph it
    cannot lower: that graph runs in PyTorch, reported."""
    return _boxed(_timed(_compile_graph, gm, example_inputs, None, forward_programs))


def compile_backward_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
    """`compile_graph` for a backward: in `backward_programs` programs, and
    taking None for the gradients of outputs that got none (`_MissingTangents`)."""
    return _MissingTangents(_boxed(_timed(_compile_graph, gm, example_inputs, None, backward_programs)),
                            lambda: gm, backward_programs)


def _boxed(runs: Callable) -> Callable:
    """`runs` called with one list of inputs (`_ProgramsInSequence` is already)."""
    return runs if getattr(runs, "_boxed_call", False) else make_boxed_func(runs)


def _timed(compile: Callable, *args: Any) -> Any:
    """`compile(*args)`, its time counted as the compiler's, not AOTAutograd's."""
    start = time.perf_counter()
    try:
        return compile(*args)
    finally:
        _in_compiler.seconds += time.perf_counter() - start


def _compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                   compile_failed: Exception | None = None, programs: int = 1) -> Callable:
    """`compile_graph`, unboxed. A whole graph compiles in the background;
    `compile_failed`: the error that compile gave, the graph then lowered
    again with the ops that fail alone left to PyTorch, compiled now.
    `programs`: how many programs a graph whose every op lowers runs as."""
    try:
        graph = _as_strided_on_storage(_copy(gm))
        _attention_masks.fold(graph)
        ruled_out: dict[str, str] = {}
        if compile_failed is not None and not _rule_out_failing_ops(graph, ruled_out):
            raise compile_failed
        while True:  # until every partition lowers: each failure rules out ops of this graph
            try:
                return _partition_and_lower(graph, example_inputs, ruled_out,
                                            in_background=compile_failed is None, programs=programs)
            except _LoweringFailed as failure:
                if not _rule_out_failing_ops(failure.graph, ruled_out):
                    raise failure.__cause__ from None
    except Exception as error:  # a graph nothing could lower, or a bug of ours: it still runs
        reason = f"the graph did not lower: {one_line(error)}"
    ops = len(_aten_ops(gm))
    log.warning("a graph of %d ops runs in PyTorch: %s", ops, reason)
    _record(ops, 0, {"graph": (f"a whole graph of {ops} ops", reason)})
    return _reshapes_for_views(_copy(gm))


def _compiled_again(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], recorded_in: int,
                    error: Exception) -> Callable:
    """What runs a whole graph whose compile in the background failed: its
    share in the report taken back (unless the report was reset since
    `recorded_in`, its epoch then), the graph compiled again as `error` allows."""
    ops = len(_aten_ops(gm))
    log.warning("XLA's compile of a graph of %d ops failed (%s): compiled again, what fails left to PyTorch",
                ops, one_line(error))
    if recorded_in == _epoch:
        _record(-ops, -ops, {}, graphs=-1, xla_programs=-1)
    return _compile_graph(gm, example_inputs, compile_failed=error)


class _LoweringFailed(Exception):
    def __init__(self, graph: torch.fx.GraphModule):
        self.graph = graph


def _copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A new graph module over the same attributes (tensor constants are
    shared, not copied: a deep copy of a graph holding constants fails)."""
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    return torch.fx.GraphModule(gm, graph)


def _as_strided_on_storage(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """`as_strided` reads its input's storage, which only PyTorch has: where
    the input is a permuted view of a dense block, it is rewritten to read
    that block in storage order (permuted back, made contiguous, flattened),
    which any row-major tensor of the same values gives, in XLA or in PyTorch.
    An input that is not a dense block (a slice, a broadcast) stays as it is,
    and `_why_not` keeps it in PyTorch."""
    aten = torch.ops.aten
    rewritten = False
    for node in [n for n in gm.graph.nodes if n.target is aten.as_strided.default]:
        source = node.args[0].meta.get("val")
        if not isinstance(source, torch.Tensor) or _reads_own_storage(source) or \
                not torch._prims_common.is_non_overlapping_and_dense_or_false(source):
            continue
        rewritten = True
        order = sorted(range(source.ndim), key=lambda d: (source.stride(d), source.shape[d]), reverse=True)
        offset = node.args[3] if len(node.args) > 3 else node.kwargs.get("storage_offset", source.storage_offset())
        with gm.graph.inserting_before(node), torch._guards.detect_fake_mode([source]) or contextlib.nullcontext():
            permuted = gm.graph.call_function(aten.permute.default, (node.args[0], order))
            permuted.meta["val"] = source.permute(order)
            dense = gm.graph.call_function(aten.clone.default, (permuted,),
                                           {"memory_format": torch.contiguous_format})
            dense.meta["val"] = permuted.meta["val"].contiguous()
            flat = gm.graph.call_function(aten.view.default, (dense, [-1]))
            flat.meta["val"] = dense.meta["val"].view(-1)
        node.args = (flat, node.args[1], node.args[2], offset - source.storage_offset())
        node.kwargs = {}
    if rewritten:  # the code again (a big graph's takes a tenth of a second)
        gm.recompile()
    return gm


def _reads_own_storage(t: torch.Tensor) -> bool:
    """Whether `t`'s storage, as `as_strided` reads it, is `t` in row-major order."""
    return t.storage_offset() == 0 and t.is_contiguous()


def _reshapes_for_views(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """The graph's views as reshapes, for what runs in PyTorch: a tensor an
    XLA program made is row-major, where the graph may have been traced with
    another layout (a kernel's transposed output) that `view` relied on."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten.view.default:
            node.target = torch.ops.aten.reshape.default
    gm.recompile()
    return gm


def _partition_and_lower(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                         ruled_out: dict[str, str], in_background: bool, programs: int = 1) -> Callable:
    """The graph as one XLA program when every op lowers (compiled in the
    background if `in_background`; as `programs` in sequence if more than
    one), else as partitions in XLA within an eager graph. Raises
    _LoweringFailed with the (partition) graph that failed."""
    every_op = _aten_ops(gm)
    if not every_op:  # inputs handed back as outputs: nothing to run, nothing to report
        return gm
    supported = _Supported(ruled_out)
    if (all(supported.is_node_supported(None, n) for n in gm.graph.nodes if n.op == "call_function")
            and all(isinstance(v, torch.Tensor) for v in example_inputs)):  # no partitions to look for
        cut = _cut(gm, programs) if programs > 1 else None
        if cut is not None:
            runs = _ProgramsInSequence(gm, cut)
        else:
            if_compile_fails = functools.partial(_compiled_again, gm, example_inputs, _epoch) if in_background \
                else None
            runs = _lower(gm, list(example_inputs), if_compile_fails)
        _record(len(every_op), len(every_op), {})
        return runs
    # Proposing reads the graph; fusing (below) rewrites it, so it fuses a copy.
    partitions = CapabilityBasedPartitioner(gm, supported, allows_single_node_partition=True).propose_partitions()
    in_xla = sum(1 for p in partitions for n in p.nodes if _is_aten_op(n))
    if not partitions:
        _record(len(every_op), 0, supported.kept)
        return _reshapes_for_views(_copy(gm))
    partitioner = CapabilityBasedPartitioner(_copy(gm), supported, allows_single_node_partition=True)
    fused = partitioner.fuse_partitions(partitioner.propose_partitions())
    for name, submodule in list(fused.named_children()):
        if not name.startswith("fused_"):
            continue
        values = _example_values(submodule)
        if not all(isinstance(v, torch.Tensor) for v in values):
            for node in _aten_ops(submodule):
                supported.kept[node.name] = (str(node.target), "a partition input is not a tensor")
            in_xla -= len(_aten_ops(submodule))
            continue  # stays eager
        setattr(fused, name, _Runner(_lower(submodule, values)))
    _reshapes_for_views(fused)
    _record(len(every_op), in_xla, supported.kept)
    return fused


def _pieces(gm: torch.fx.GraphModule, programs: int) -> list[list[torch.fx.Node]]:
    """`gm`'s ops cut in their order into `programs` runs of about equal
    length; an op's `getitem`s stay with it (a tuple is no program's output)."""
    ops = [n for n in gm.graph.nodes if n.op == "call_function"]
    length = -(-len(ops) // programs)
    piece_of: dict[torch.fx.Node, int] = {}
    for i, node in enumerate(ops):
        piece_of[node] = piece_of[node.args[0]] if node.target is operator.getitem else i // length
    pieces: list[list[torch.fx.Node]] = [[] for _ in range(programs)]
    for node in ops:
        pieces[piece_of[node]].append(node)
    return [piece for piece in pieces if piece]


def _cut(gm: torch.fx.GraphModule, programs: int) -> list[tuple[list[torch.fx.Node], list[torch.fx.Node]]] | None:
    """`_pieces`, each with the values it reads from outside it (inputs,
    constants, earlier pieces' ops); None where one of those is not a tensor."""
    pieces = _pieces(gm, programs)
    piece_of = {node: i for i, piece in enumerate(pieces) for node in piece}
    cut = []
    for i, piece in enumerate(pieces):
        reads = list(dict.fromkeys(arg for node in piece for arg in node.all_input_nodes if piece_of.get(arg) != i))
        if not all(isinstance(arg.meta.get("val"), torch.Tensor) for arg in reads):
            return None
        cut.append((piece, reads))
    return cut


class _ProgramsInSequence:
    """A graph whose every op lowers, run as XLA programs one after another
    (`_pieces`): each value (an input, a constant, a program's output) is let
    go after the last program that reads it. Called with one list of inputs,
    which it empties, as AOTAutograd's boxed compiled graphs are."""

    def __init__(self, gm: torch.fx.GraphModule, cut: list[tuple[list[torch.fx.Node], list[torch.fx.Node]]]):
        self._boxed_call = True  # an attribute of its own: AOTAutograd's wrappers copy the instance's
        outputs = _output_args(gm)
        last_read: dict[torch.fx.Node, int] = {}  # the last piece that reads a value; the graph's outputs: none
        for i, (_, reads) in enumerate(cut):
            for arg in reads:
                last_read[arg] = i
        for output in outputs:
            if isinstance(output, torch.fx.Node):
                last_read[output] = len(cut)
        self._inputs = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        self._constants = {n.name: _attribute(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"}
        self._outputs = [(o.name, None) if isinstance(o, torch.fx.Node) else (None, o) for o in outputs]
        self._steps = []  # (program, the names it reads, the names it writes, the names then let go)
        for i, (piece, reads) in enumerate(cut):
            graph, made = torch.fx.Graph(), {}
            for arg in reads:
                made[arg] = graph.placeholder(arg.name)
                made[arg].meta = dict(arg.meta)
            for node in piece:
                made[node] = graph.node_copy(node, made.__getitem__)
            writes = [node for node in piece if last_read.get(node, -1) > i]
            graph.output(tuple(made[node] for node in writes))
            program = _lower(torch.fx.GraphModule(gm, graph), [arg.meta["val"] for arg in reads])
            let_go = [arg.name for arg in reads if last_read[arg] == i]
            self._steps.append((program, [arg.name for arg in reads], [node.name for node in writes], let_go))

    def __call__(self, inputs: list) -> list:
        values = dict(self._constants)
        values.update(zip(self._inputs, inputs))
        inputs.clear()  # the caller's references go: each input lives until its last reader
        for program, reads, writes, let_go in self._steps:
            values.update(zip(writes, program(*[values[name] for name in reads])))
            for name in let_go:
                del values[name]
        return [values[name] if name is not None else constant for name, constant in self._outputs]


class _MissingTangents:
    """A compiled backward, run also where autograd gives None for the
    gradients of some of the forward's outputs (the tangents): outputs the
    loss does not reach, such as a model's logits returned beside its loss
    (`_no_zeros_for_outputs_without_gradients` stops autograd from making
    zeros of their size for them, which it would hold until the backward
    returns: GPT-2 small's at 8 x 1024, 1.5 GiB). For each set of missing
    tangents the backward's graph is compiled again with them made inside as
    zeros, which XLA folds away; where that variant does not lower whole,
    zeros are made in PyTorch and the backward as compiled runs. A variant
    of a recorded program (`recorded_under`: its lowering's key) is recorded
    in cuxla's cache beside it, so that a later process runs it without
    unpickling the graph. Called with one list of inputs, which it empties."""

    def __init__(self, runs: Callable, graph: Callable[[], torch.fx.GraphModule], programs: int,
                 recorded_under: bytes | None = None):
        self._boxed_call = True
        self._runs, self._graph, self._programs, self._recorded_under = runs, graph, programs, recorded_under
        self._variants: dict[tuple[int, ...], Callable] = {}

    def __call__(self, inputs: list) -> Any:
        missing = tuple(i for i, value in enumerate(inputs) if value is None)
        if not missing:
            return self._runs(inputs)
        variant = self._variants.get(missing)
        if variant is None:
            variant = self._variants[missing] = self._variant(missing)
        return variant(inputs)

    def _variant(self, missing: tuple[int, ...]) -> Callable:
        key = self._recorded_under and self._recorded_under + b"\0without the tangents " + repr(missing).encode()
        recorded = self._variant_from_record(key, missing) if key else None
        if recorded is not None:
            return recorded
        made = _tangents_made_zeros(_as_strided_on_storage(_copy(self._graph())), missing)
        if made is None:  # None where AOTAutograd always passes it (an effect's token): no missing gradient
            return self._runs
        graph, zeros = made
        runs = None
        try:
            with _counted_as_graphs(False):
                runs = _partition_and_lower(graph, _example_values(graph), {}, in_background=False,
                                            programs=self._programs)
        except Exception as error:  # the backward as compiled runs instead
            log.info("the backward without %d tangents did not lower: %s", len(missing), one_line(error))
        if not isinstance(runs, (_XlaProgram, _ProgramsInSequence)):
            return self._with_zeros(missing, zeros)
        if key and isinstance(runs, _XlaProgram):
            with _disable_current_modes():
                cuxla._cuxla.compile_cache_store(key, pickle.dumps({"program": runs.record, "zeros": zeros}))
        return self._given_only(runs, missing)

    def _variant_from_record(self, key: bytes, missing: tuple[int, ...]) -> Callable | None:
        """The variant an earlier process recorded under `key`; None where there is none, or its lowering is gone."""
        kept = cuxla._cuxla.compile_cache_load(key)
        if kept is None:
            return None
        kept = pickle.loads(kept)
        instead = self._with_zeros(missing, kept["zeros"])
        with _counted_as_graphs(False):
            program = _XlaProgram.from_record(
                kept["program"], lambda error: lambda *given: instead(_with_holes(given, missing)))
        return None if program is None else self._given_only(program, missing)

    @staticmethod
    def _given_only(runs: Callable, missing: tuple[int, ...]) -> Callable:
        """`runs` (a variant) called with the inputs that were given."""
        with _lock:
            _stats["backwards_without_zeros"] += 1
        runs = _boxed(runs)

        def given_only(inputs: list) -> Any:
            given = [value for i, value in enumerate(inputs) if i not in missing]
            inputs.clear()  # each input lives as long as the variant keeps it
            return runs(given)

        return given_only

    def _with_zeros(self, missing: tuple[int, ...], zeros: list) -> Callable:
        """The backward as compiled, given zeros made in PyTorch for the missing tangents."""
        def runs(inputs: list) -> Any:
            for i, (shape, dtype, device) in zip(missing, zeros):
                inputs[i] = torch.zeros(shape, dtype=dtype, device=device)
            return self._runs(inputs)

        return runs


def _tangents_made_zeros(graph: torch.fx.GraphModule, missing: tuple[int, ...]) -> tuple | None:
    """`graph` (a backward) with its inputs at `missing` made inside as
    zeros, and those zeros' (shape, dtype, device); None where one of them is
    no tangent."""
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    if not all(placeholders[i].name.startswith("tangents") for i in missing):
        return None
    values = [placeholders[i].meta.get("val") for i in missing]
    if not all(isinstance(v, torch.Tensor) and _static_shape(v) for v in values):
        raise ValueError("autograd gave None for a gradient that is not a tensor of known shape")
    zeros = [(tuple(v.shape), v.dtype, v.device) for v in values]
    first_op = next(n for n in graph.graph.nodes if n.op != "placeholder")
    for i, (shape, dtype, device), value in zip(missing, zeros, values):
        with graph.graph.inserting_before(first_op):
            made = graph.graph.call_function(torch.ops.aten.zeros.default, (list(shape),),
                                             {"dtype": dtype, "device": device})
        made.meta["val"] = value
        placeholders[i].replace_all_uses_with(made)
        graph.graph.erase_node(placeholders[i])
    graph.recompile()
    return graph, zeros


def _with_holes(given: Sequence[Any], missing: tuple[int, ...]) -> list:
    """`given` with None inserted at the `missing` positions (in increasing order)."""
    inputs = list(given)
    for i in missing:
        inputs.insert(i, None)
    return inputs


@contextlib.contextmanager
def _counted_as_graphs(counted: bool):
    before, _counting.graphs = _counting.graphs, counted
    try:
        yield
    finally:
        _counting.graphs = before


def _no_zeros_for_outputs_without_gradients(compiled: Callable) -> Callable:
    """`compiled` (AOTAutograd's forward), its outputs' backward node told to
    give None, not zeros, for the gradients of outputs the loss did not reach
    (cuxla's backward, `_MissingTangents`, takes None)."""
    def run(*args: Any) -> Any:
        outputs = compiled(*args)
        for output in outputs if isinstance(outputs, (list, tuple)) else (outputs,):
            node = getattr(output, "grad_fn", None)
            # AOTAutograd's autograd.Function with plain tensors' tangents (its
            # subclasses' tangents are made from each tangent's metadata).
            forward = getattr(node, "_forward_cls", None)
            if hasattr(forward, "compiled_bw") and getattr(forward, "maybe_subclass_metadata", True) is None:
                node.set_materialize_grads(False)
        return outputs

    return functools.wraps(compiled)(run)


def _attribute(gm: torch.fx.GraphModule, target: str) -> Any:
    """What a `get_attr` node of `gm` reads (its target may be a dotted path)."""
    value = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _arguments_taken(lowered: Any) -> int:
    """How many arguments a lowered program's entry function takes."""
    for op in lowered.compiler_ir("stablehlo").body.operations:
        if op.operation.name == "func.func" and str(op.attributes["sym_name"]) == '"main"':
            return len(op.regions[0].blocks[0].arguments)
    raise ValueError("the lowered program has no main function")


def _lower(gm: torch.fx.GraphModule, inputs: Sequence[torch.Tensor],
           if_compile_fails: Callable[[Exception], Callable] | None = None) -> "_XlaProgram":
    try:
        return _XlaProgram(gm, inputs, if_compile_fails=if_compile_fails)
    except Exception as error:
        raise _LoweringFailed(gm) from error


def _rule_out_failing_ops(gm: torch.fx.GraphModule, ruled_out: dict[str, str]) -> bool:
    """Lowers each op of `gm` alone; those that fail are kept in PyTorch
    for the rest of this graph's compile. False when none fails alone."""
    found = False
    for node in _aten_ops(gm):
        if node.name in ruled_out:
            continue
        single, values = _single_op_graph(node)
        if single is None:
            continue
        try:
            _XlaProgram(single, values, count=False)
        except Exception as error:
            ruled_out[node.name] = f"its lowering failed: {one_line(error)[:200]}"
            found = True
    return found


def _single_op_graph(node: torch.fx.Node):
    """A graph of `node` alone, its tensor inputs as placeholders; (None, None)
    when an input is not a tensor."""
    graph = torch.fx.Graph()
    values, mapping = [], {}
    for arg in node.all_input_nodes:
        value = arg.meta.get("val")
        if not isinstance(value, torch.Tensor):
            return None, None
        mapping[arg] = graph.placeholder(arg.name)
        values.append(value)
    copied = graph.node_copy(node, lambda n: mapping[n])
    outputs = copied if isinstance(node.meta.get("val"), (list, tuple)) else (copied,)
    graph.output(outputs)
    return torch.fx.GraphModule(torch.nn.Module(), graph), values


class _Runner(torch.nn.Module):
    """A fused partition run as its XLA program, inside the eager graph."""

    def __init__(self, program: _XlaProgram):
        super().__init__()
        self.program = program

    def forward(self, *args):
        outputs = self.program(*args)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _partition(joint: torch.fx.GraphModule, joint_inputs: Any, *, num_fwd_outputs: int,
               **options: Any) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule]:
    """AOTAutograd's min-cut split of the joint graph into forward and
    backward (inductor's): the backward recomputes cheap elementwise ops
    where saving their outputs would cost more memory (GPT-2 small's forward
    at 4 x 1024 saves 3.3 GiB, not 5.0). Then, for what the forward saves as
    a view of one of its inputs (a Linear's transposed weight), of another
    tensor it saves, or a transpose of a tensor it makes (an activation that
    a weight's gradient reads transposed): XLA would write the view as a copy
    (a second copy of every weight; a transpose of the activation), so the
    forward saves the input or tensor and the backward makes the view again.
    Before, masks made from no input become attention's flags
    (`_attention_masks`), in forward and backward alike."""
    _attention_masks.fold(joint)
    forward, backward = min_cut_rematerialization_partition(joint, joint_inputs, num_fwd_outputs=num_fwd_outputs,
                                                             **options)
    returned = list(_output_args(forward))
    made_in_forward = {n.name: n for n in forward.graph.nodes}
    backward_inputs = {n.name: n for n in backward.graph.nodes if n.op == "placeholder"}
    for name, saved in list(backward_inputs.items()):
        chain, base = _view_chain(made_in_forward.get(name))
        if not chain or chain[0] not in returned[num_fwd_outputs:]:
            continue
        position = num_fwd_outputs + returned[num_fwd_outputs:].index(chain[0])
        if base.name in backward_inputs:  # saved already: the view's entry goes
            source = backward_inputs[base.name]
            del returned[position]
        elif base.op == "placeholder" or _transposed(base, chain):  # the forward saves that instead
            source, returned[position] = saved, base
            saved.meta = dict(base.meta)
            backward_inputs[base.name] = saved
        else:
            continue
        # Each user gets the views made just before it: a backward run as
        # several programs then hands no view's copy from one to the next.
        for user in list(saved.users):
            remade = source
            with backward.graph.inserting_before(user):
                for view in reversed(chain):
                    remade = backward.graph.call_function(view.target, (remade, *view.args[1:]), view.kwargs)
                    remade.meta = dict(view.meta)
            user.replace_input_with(saved, remade)
        if source is not saved:
            backward.graph.erase_node(saved)
            del backward_inputs[name]
    forward.graph.output_node().args = (tuple(returned),)
    for module in (forward, backward):
        module.graph.eliminate_dead_code()
        module.recompile()
    return forward, backward


def _transposed(base: torch.fx.Node, chain: list[torch.fx.Node]) -> bool:
    """Whether the views `chain` permute `base`'s elements, all and no more,
    of one dtype and static shapes: a view XLA writes as a transpose (a
    reshape alone it writes as the tensor itself, and a slice holds less)."""
    made, seen = base.meta.get("val"), chain[0].meta.get("val")
    return (any(view.target is torch.ops.aten.permute.default for view in chain)
            and isinstance(made, torch.Tensor) and isinstance(seen, torch.Tensor) and made.dtype == seen.dtype
            and _static_shape(made) and _static_shape(seen) and made.numel() == seen.numel())


def _view_chain(node: torch.fx.Node | None) -> tuple[list[torch.fx.Node], torch.fx.Node | None]:
    """The view ops that make `node` from a tensor, last first, and that
    tensor (`node` and no ops where it is not a view)."""
    chain = []
    # Only views whose other arguments are constants: a symbolic size is a
    # node of the graph it was made in.
    while (isinstance(node, torch.fx.Node) and node.op == "call_function" and _is_view_op(node.target)
           and not any(isinstance(a, torch.fx.Node) for a in pytree.tree_leaves((node.args[1:], node.kwargs)))):
        chain.append(node)
        node = node.args[0]
    return chain, node


class _CompiledGraph(OutputCode):
    """A forward or backward graph compiled by cuxla, in the form AOTAutograd's
    cache keeps (a later process then skips AOTAutograd's tracing and
    partitioning): the graph itself goes to disk, and with it, where the
    whole graph is one XLA program, that program's record (its lowering's
    key, constants and outputs' plan). A later process runs the recorded
    program (its lowering and XLA's executable from cuxla's cache) without
    the graph; where there is no record, or it cannot run (its lowering gone
    from the cache, XLA's compile failing, `fallback_random` changed), it
    loads the graph and compiles it again."""

    def __init__(self, gm: torch.fx.GraphModule, backward: bool = False):
        super().__init__()
        self._boxed_call = True  # called with one list of inputs, as compile_graph's functions are
        self._backward = backward  # runs as `backward_programs` programs
        self._graph: torch.fx.GraphModule | None = _empty_constants_made_real(gm)
        self._pickled: bytes | None = None
        self._run: Callable | None = None
        # The whole graph's XLA program's record, and its ops (pickled while in AOTAutograd's cache).
        self._program: dict | bytes | None = None

    def compile(self) -> "_CompiledGraph":
        runs = _timed(_compile_graph, self._graph, _example_values(self._graph), None, self._programs())
        self._program = {"record": runs.record, "ops": len(_aten_ops(self._graph)),
                         "fallback_random": fallback_random} if isinstance(runs, _XlaProgram) else None
        self._run = self._taking_inputs(runs)
        return self

    def _programs(self) -> int:
        return backward_programs if self._backward else forward_programs

    def _taking_inputs(self, runs: Callable) -> Callable:
        """What runs the compiled graph on a list of inputs (a backward's may hold None: `_MissingTangents`)."""
        if not self._backward:
            return _boxed(runs)
        recorded = isinstance(runs, _XlaProgram) and self._programs() == 1
        return _MissingTangents(_boxed(runs), self._loaded_graph, self._programs(),
                                runs.record["lowering_key"] if recorded else None)

    def _loaded_graph(self) -> torch.fx.GraphModule:
        """The graph, unpickled where it ran from its program's record."""
        if self._graph is None:
            from torch.fx._graph_pickler import GraphPickler

            self._graph = GraphPickler.loads(self._pickled, torch._subclasses.FakeTensorMode())
        return self._graph

    def __call__(self, inputs: list) -> Any:
        return self._run(inputs)

    def prepare_for_serialization(self) -> None:
        from torch.fx._graph_pickler import GraphPickler, Options, _ops_filter_safe

        # cuxla's own ops (attention) load wherever cuxla is imported; of each
        # node's metadata only its value (a fake tensor) is read again.
        ops = Options(ops_filter=lambda name: _ops_filter_safe(name) or name.startswith("torch.ops.cuxla."),
                      node_metadata_key_filter=lambda key: key == "val")
        # Both pickled here, outside AOTAutograd's modes: a CUDA tensor (a
        # constant) is pickled by a copy to the host, fake under its fake mode.
        with _disable_current_modes():
            try:
                pickled = GraphPickler.dumps(self._graph, ops)
            except Exception as error:  # PyTorch then keeps no entry, and says so without saying where
                log.warning("AOTAutograd's cache keeps no entry for this graph: %s",
                            _unpicklable(self._graph, ops, error))
                raise
            program = pickle.dumps(self._program)
        self._pickled, self._program, self._graph, self._run = pickled, program, None, None

    def post_compile(self, example_inputs: Sequence[Any], constants: Any, graph_kwargs: Any) -> None:
        if self._run is not None:  # compiled in this process
            return
        from torch.fx._graph_pickler import GraphPickler

        fake_mode = torch._guards.detect_fake_mode(example_inputs) or torch._subclasses.FakeTensorMode()
        if isinstance(self._program, bytes):
            self._program = pickle.loads(self._program)
        # The record holds where the graph's ops run, as one program: it stands
        # while the settings that move them, or cut it into several, do.
        runs_as_recorded = self._program is not None and self._program["fallback_random"] == fallback_random \
            and self._programs() == 1
        program = _timed(self._from_record, fake_mode) if runs_as_recorded else None
        if program is not None:
            self._run = self._taking_inputs(program)
        else:
            self._graph = GraphPickler.loads(self._pickled, fake_mode)
            self.compile()
        with _lock:
            _stats["graphs_from_aot_autograd_cache"] += 1

    def _from_record(self, fake_mode: Any) -> "_XlaProgram | None":
        from torch.fx._graph_pickler import GraphPickler

        def compiled_again(epoch: int, error: Exception) -> Callable:
            graph = GraphPickler.loads(self._pickled, fake_mode)
            return _compiled_again(graph, _example_values(graph), epoch, error)

        program = _XlaProgram.from_record(self._program["record"], functools.partial(compiled_again, _epoch))
        if program is not None:
            _record(self._program["ops"], self._program["ops"], {})
        return program

    def set_triton_bundle(self, triton_bundle: Any) -> None:
        pass  # no Triton kernels


def _empty_constants_made_real(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """`gm` with its tensor constants that have no elements made fresh empty
    tensors. A model's `torch.tensor([], device="cuda")` (transformers' KV
    cache starts so) reaches the graph as a fake tensor, or as a real one
    whose data pointer PyTorch guards while tracing; AOTAutograd's cache can
    pickle neither. With no elements, nothing of it is lost."""
    with _disable_current_modes():  # made under AOTAutograd's fake mode, they would be fake again
        for name, value in list(gm._buffers.items()):
            if value is not None and value.numel() == 0:
                gm.register_buffer(name, torch.empty_strided(value.shape, value.stride(), dtype=value.dtype,
                                                             device=value.device))
    return gm


def _described(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{type(value).__name__} {tuple(value.shape)} {value.dtype} on {value.device}"
    return type(value).__name__


def _unpicklable(gm: torch.fx.GraphModule, options: Any, error: Exception) -> str:
    """Which part of `gm` GraphPickler failed on (`error`): an attribute of
    the module, or a node's arguments or value."""
    from torch.fx._graph_pickler import GraphPickler

    def fails(value: Any) -> bool:
        try:
            GraphPickler.dumps(value, options)
        except Exception:
            return True
        return False

    for name, value in gm.__dict__.items():
        if name != "_graph" and fails(value):
            part = repr(name)
            if isinstance(value, dict):  # the module's buffers: which one
                part, value = next(((f"{name}[{key!r}]", held) for key, held in value.items() if fails(held)),
                                   (part, value))
            return f"its attribute {part} ({_described(value)}) cannot be pickled: {one_line(error)}"
    for node in gm.graph.nodes:
        held = [leaf for leaf in pytree.tree_leaves((node.args, node.kwargs, node.meta.get("val")))
                if not isinstance(leaf, torch.fx.Node)]
        if fails(held):
            return f"node {node.name} ({node.target}) holds what cannot be pickled: {one_line(error)}"
    return one_line(error)


def _compile_for_aot_cache(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                           backward: bool = False) -> _CompiledGraph:
    return _CompiledGraph(gm, backward).compile()


def _aot_backend(cached: bool) -> Callable:
    """AOTAutograd with cuxla's compiler, its graphs kept in AOTAutograd's
    cache if `cached` (a compiler of that kind each, made for one compile:
    AOTAutograd wraps the backward's)."""
    def compiler(compile: Callable, compile_for_cache: Callable):
        return SerializableAOTDispatchCompiler(_CompiledGraph, compile_for_cache) if cached else compile

    return aot_autograd(fw_compiler=compiler(compile_graph, _compile_for_aot_cache),
                        bw_compiler=compiler(compile_backward_graph,
                                             functools.partial(_compile_for_aot_cache, backward=True)),
                        decompositions=_decompositions(), partition_fn=_partition)


def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
    """The backend: `torch.compile(model, backend="cuxla")` finds it through
    the `torch_dynamo_backends` entry point; `backend=cuxla.dynamo.backend` works too."""
    # A PyTorch without this setting compiles the backward at its first call.
    config = {"force_non_lazy_backward_lowering": compile_backward_with_forward} \
        if hasattr(functorch_config, "force_non_lazy_backward_lowering") else {}
    cached = cuxla._cuxla.compile_cache_stats()["dir"] is not None and \
        hasattr(functorch_config, "bundled_autograd_cache")
    if cached:
        # AOTAutograd's cache keeps the compiled graphs themselves ("bundled"),
        # under a key that holds the graph module's attributes: cuxla's
        # lowering code among them, so that no other compiler's entry (nor
        # another cuxla's) is taken for cuxla's.
        config["bundled_autograd_cache"] = True
        gm._cuxla_lowering_code = _lowering_source_digest()
    start, in_compiler = time.perf_counter(), _in_compiler.seconds
    try:
        with functorch_config.patch(config), _attention.ThePair():
            compiled = _aot_backend(cached)(gm, example_inputs)
        # With symbolic shapes a missing tangent's zeros would have no known
        # shape: autograd makes them.
        static = all(_static_shape(v) if isinstance(v, torch.Tensor) else not isinstance(v, torch.SymInt)
                     for v in example_inputs)
        return _no_zeros_for_outputs_without_gradients(compiled) if static else compiled
    finally:
        aot_s = time.perf_counter() - start - (_in_compiler.seconds - in_compiler)
        with _lock:
            _stats["aot_autograd_s"] += aot_s
