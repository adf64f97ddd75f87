"""Attention masks made from no input, folded into the attention's flags.

Transformers builds a decoder's causal mask inside the model (from `arange`
and comparisons) whenever it cannot prove the mask unneeded, and under
`torch.compile` with the PyTorch of the time it never can: every layer's
attention then gets a (batch, 1, T, T) mask that holds nothing but the
causal pattern, and a model without padding gets one that keeps everything.
A fused attention given a mask reads it tile by tile and computes every
score; told `is_causal` it skips the blocks above the diagonal (half of the
work at one sequence). So before partitioning, each mask of cuxla's pair
(`_attention`) computed from no input of the graph (no parameter, no input,
no random draw) is computed once, and where it is the causal pattern the
pair takes `is_causal` instead, and where it keeps every position, no mask.
Outputs and gradients are the same: a masked position weighs exactly 0
either way (a float mask counts as masking only at -inf or its dtype's
lowest number), and no row of either pattern is wholly masked.
"""
from __future__ import annotations

import logging

import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.utils._python_dispatch import _disable_current_modes

from . import _attention
from ._errors import one_line

log = logging.getLogger("cuxla.dynamo")

_PAIR = (_attention.attention._opoverload, _attention.attention_backward._opoverload)
_LARGEST_MASK = 2**30  # elements: a mask beyond this is left as it is, not computed at compile time
_MOST_OPS = 64  # ops making one mask: a longer computation is left as it is


def fold(gm: torch.fx.GraphModule) -> int:
    """Rewrites in place each attention of `gm` whose mask is made from no
    input and is the causal pattern (to `is_causal`, no mask) or keeps every
    position (no mask); gives how many attentions it rewrote."""
    kinds: dict[torch.fx.Node, str | None] = {}
    rewritten = 0
    for node in [n for n in gm.graph.nodes if n.op == "call_function" and n.target in _PAIR]:
        arguments = _bound(node)
        mask = arguments["bias"]
        if not isinstance(mask, torch.fx.Node) or arguments["is_causal"] or arguments.get("bias_needs_grad"):
            continue
        if mask not in kinds:
            kinds[mask] = _kind(mask)
        if kinds[mask] is None:
            continue
        arguments["bias"], arguments["is_causal"] = None, kinds[mask] == "causal"
        node.args, node.kwargs = tuple(arguments.values()), {}
        rewritten += 1
    if rewritten:
        gm.graph.eliminate_dead_code()
        gm.recompile()
        log.info("%d of the attention pair's ops take their mask, made from no input, as flags (%s)", rewritten,
                 ", ".join(sorted({kind for kind in kinds.values() if kind})))
    return rewritten


def _bound(node: torch.fx.Node) -> dict:
    """The node's arguments by the op's schema, every one named, in order."""
    schema = node.target._schema.arguments
    given = dict(zip((a.name for a in schema), node.args)) | dict(node.kwargs)
    return {a.name: given.get(a.name, a.default_value) for a in schema}


def _kind(mask: torch.fx.Node) -> str | None:
    """"causal" or "none" (keeps every position) for a mask computed from no
    input of its graph; None for any other mask."""
    makers = _made_from_nothing(mask)
    value = mask.meta.get("val")
    if makers is None or not isinstance(value, torch.Tensor) or value.numel() > _LARGEST_MASK or value.ndim < 2:
        return None
    try:
        with unset_fake_temporarily(), _disable_current_modes():
            computed: dict[torch.fx.Node, object] = {}
            for node in makers:  # in the graph's order
                args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), computed.__getitem__)
                computed[node] = node.target(*args, **kwargs)
            return _pattern(computed[mask])
    except Exception as error:  # a mask that cannot be computed here stays as it is
        log.info("an attention mask made from no input stays a mask: computing it failed: %s", one_line(error))
        return None


def _made_from_nothing(mask: torch.fx.Node) -> list[torch.fx.Node] | None:
    """The ops that make `mask`, in the graph's order, where each is an ATen
    op that is not random and none reads an input of the graph; else None."""
    makers, to_visit = set(), [mask]
    while to_visit:
        node = to_visit.pop()
        if node in makers:
            continue
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload) or \
                torch.Tag.nondeterministic_seeded in node.target.tags or len(makers) >= _MOST_OPS:
            return None
        makers.add(node)
        to_visit.extend(node.all_input_nodes)
    return [n for n in mask.graph.nodes if n in makers]


def _pattern(mask: object) -> str | None:
    if not isinstance(mask, torch.Tensor) or mask.ndim < 2:
        return None
    masked = ~mask if mask.dtype == torch.bool else None
    if masked is None:
        if not mask.is_floating_point():
            return None
        masked = mask <= torch.finfo(mask.dtype).min  # -inf too
        if not torch.equal(masked | (mask == 0), torch.ones_like(masked)):
            return None  # a number that neither keeps nor masks a position
    if not masked.any():
        return "none"
    queries, keys = mask.shape[-2:]
    causal = torch.ones(queries, keys, dtype=torch.bool, device=mask.device).tril()
    return "causal" if queries == keys and torch.equal(~masked, causal.expand(mask.shape)) else None
