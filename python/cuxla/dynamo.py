"""torch.compile(model, backend="cuxla"): PyTorch graphs run by XLA.

Dynamo hands each graph to AOTAutograd, which gives a forward and (when
training) a backward ATen graph. Each is partitioned: groups of ops that
torchax can lower become one XLA program each (traced to StableHLO by JAX,
compiled by cuxla's own PJRT client, run through `cuxla.torch.call`, so
their inputs and outputs are handed over zero-copy); the rest (ops torchax
cannot lower, random ops, non-tensor values) runs in eager PyTorch. What fell
back, and why, is in `report()` and logged on "cuxla.dynamo".
"""
from __future__ import annotations

import collections
import copy
import logging
import operator
import threading
import time
from typing import Any, Callable, Sequence

import torch
import torch.fx
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupport

import cuxla

from . import _torchax
from . import torch as cuxla_torch

log = logging.getLogger("cuxla.dynamo")

# Random ops: XLA would draw other numbers than PyTorch (and a traced key
# would repeat them every call), so they stay in PyTorch.
_RANDOM_TAG = torch.Tag.nondeterministic_seeded

# Ops whose torchax 0.0.13 lowering gives other numbers than PyTorch (found
# by the training tests: gradients of a max-pool off by hundreds, of a batch
# norm by 1e-2); they stay in PyTorch.
_WRONG_LOWERINGS = {
    torch.ops.aten.max_pool2d_with_indices_backward.default,
    torch.ops.aten.native_batch_norm_backward.default,
}

_lock = threading.Lock()
# Ops whose lowering raised when traced (torchax bugs, signature drift),
# learned while compiling: target -> reason.
_failed_lowerings: dict[Any, str] = {}
_fallbacks: collections.Counter[tuple[str, str]] = collections.Counter()
_stats = {"graphs": 0, "xla_programs": 0, "lowering_s": 0.0, "compile_s": 0.0}


def report() -> dict[str, Any]:
    """What the backend did so far: graphs seen, XLA programs made, time spent
    lowering and compiling, and every op that fell back to PyTorch, with why."""
    with _lock:
        return {
            **_stats,
            "fallbacks": [{"op": op, "reason": why, "count": n} for (op, why), n in _fallbacks.items()],
        }


def reset_report() -> None:
    with _lock:
        _fallbacks.clear()
        _stats.update(graphs=0, xla_programs=0, lowering_s=0.0, compile_s=0.0)


def _tensor_meta(node: torch.fx.Node) -> list[torch.Tensor]:
    value = node.meta.get("val")
    values = value if isinstance(value, (list, tuple)) else [value]
    return [v for v in values if isinstance(v, torch.Tensor)]


def _why_not(node: torch.fx.Node) -> str | None:
    """None when XLA can run `node`, else the reason it cannot."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload) and _RANDOM_TAG in target.tags:
        return "random op: stays in PyTorch so that it draws PyTorch's numbers"
    if target in _WRONG_LOWERINGS:
        return "torchax's lowering disagrees with PyTorch"
    if target in _failed_lowerings:
        return _failed_lowerings[target]
    if not _torchax.has_lowering(target):
        return "no torchax lowering"
    value = node.meta.get("val")
    if value is None or any(not isinstance(v, torch.Tensor) for v in (value if isinstance(value, (list, tuple)) else [value])):
        return "produces a non-tensor value"
    for arg in node.all_input_nodes:
        for t in _tensor_meta(arg):
            if str(t.dtype).removeprefix("torch.") not in cuxla._cuxla.DTYPES:
                return f"dtype {t.dtype} has no XLA counterpart"
    return None


class _Supported(OperatorSupport):
    """XLA runs what `_why_not` allows; `kept` holds the reasons for the rest."""

    def __init__(self):
        super().__init__()
        self.kept: dict[torch.fx.Node, str] = {}

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        if node.op != "call_function" or node.target is operator.getitem:
            return node.target is operator.getitem
        reason = _why_not(node)
        if reason is not None:
            self.kept[node] = reason
        return reason is None

    def record(self) -> None:
        """Adds the ops kept in PyTorch to the report, once per compiled graph."""
        with _lock:
            for node, reason in self.kept.items():
                _fallbacks[(str(node.target), reason)] += 1
        for node, reason in self.kept.items():
            log.info("falls back to PyTorch: %s (%s)", node.target, reason)


class _XlaProgram:
    """One graph (or partition) traced to StableHLO and compiled by cuxla."""

    def __init__(self, gm: torch.fx.GraphModule, inputs: Sequence[torch.Tensor], count: bool = True):
        env = _torchax.environment()
        import jax

        def run_graph(*jax_args):
            with env:
                outputs = gm(*env.j2t_iso(jax_args))
            outputs = outputs if isinstance(outputs, (list, tuple)) else (outputs,)
            return env.t2j_iso(tuple(outputs))

        specs = [jax.ShapeDtypeStruct(tuple(t.shape), _torchax.jax_dtype(t.dtype)) for t in inputs]
        start = time.perf_counter()
        with _torchax.lowering_context():
            # keep_unused: the program takes every input the graph is called with.
            lowered = jax.jit(run_graph, keep_unused=True).lower(*specs)
            program = lowered.as_text()
            # Outputs that are not tensors (None gradients) are not in the
            # program: remember where they go.
            out_tree = lowered.out_info
        lowered_at = time.perf_counter()
        self.out_slots = [o is not None for o in out_tree]
        platform = "cuda" if inputs and inputs[0].device.type == "cuda" else "cpu"
        self.executable = cuxla.compile(program, client=cuxla._client.client_for_platform(platform))
        if not count:
            return
        with _lock:
            _stats["xla_programs"] += 1
            _stats["lowering_s"] += lowered_at - start
            _stats["compile_s"] += time.perf_counter() - lowered_at

    def __call__(self, *args: torch.Tensor) -> list[torch.Tensor | None]:
        produced = iter(cuxla_torch.call(self.executable, *args))
        return [next(produced) if slot else None for slot in self.out_slots]


def _example_values(gm: torch.fx.GraphModule) -> list:
    return [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]


def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
    """AOTAutograd's forward/backward compiler: XLA programs for what torchax
    lowers, eager PyTorch for the rest; called with boxed arguments (one list)."""
    return make_boxed_func(_compile(gm, example_inputs))


def _compile(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
    with _lock:
        _stats["graphs"] += 1
    while True:  # until every partition lowers: each failure rules out an op
        try:
            return _partition_and_lower(gm, example_inputs)
        except _LoweringFailed as failure:
            if not _rule_out_failing_ops(failure.graph):
                raise failure.__cause__ from None


class _LoweringFailed(Exception):
    def __init__(self, graph: torch.fx.GraphModule):
        self.graph = graph


def _partition_and_lower(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
    supported = _Supported()
    partitioner = CapabilityBasedPartitioner(copy.deepcopy(gm), supported, allows_single_node_partition=True)
    partitions = partitioner.propose_partitions()
    every_op = [n for n in gm.graph.nodes if n.op == "call_function"]
    whole = len(partitions) == 1 and len(partitions[0].nodes) == len(every_op)
    if whole and all(isinstance(v, torch.Tensor) for v in example_inputs):
        return _lower(gm, example_inputs)
    if not partitions:
        supported.record()
        return gm
    fused = partitioner.fuse_partitions(partitions)
    for name, submodule in list(fused.named_children()):
        if not name.startswith("fused_"):
            continue
        values = _example_values(submodule)
        if not all(isinstance(v, torch.Tensor) for v in values):
            continue  # stays eager
        setattr(fused, name, _Runner(_lower(submodule, values)))
    fused.recompile()
    supported.record()
    return fused


def _lower(gm: torch.fx.GraphModule, inputs: Sequence[torch.Tensor]) -> "_XlaProgram":
    try:
        return _XlaProgram(gm, inputs)
    except Exception as error:
        raise _LoweringFailed(gm) from error


def _rule_out_failing_ops(gm: torch.fx.GraphModule) -> bool:
    """Lowers each op of `gm` alone; those that fail are kept in PyTorch
    from now on. False when none fails alone."""
    found = False
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem or node.target in _failed_lowerings:
            continue
        single, values = _single_op_graph(node)
        if single is None:
            continue
        try:
            _XlaProgram(single, values, count=False)
        except Exception as error:
            reason = f"torchax's lowering failed: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
            with _lock:
                _failed_lowerings[node.target] = reason
            log.info("falls back to PyTorch: %s (%s)", node.target, reason)
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


backend = aot_autograd(fw_compiler=compile_graph, bw_compiler=compile_graph)
"""The backend object: `torch.compile(model, backend="cuxla")` finds it through
the `torch_dynamo_backends` entry point; `backend=cuxla.dynamo.backend` works too."""
