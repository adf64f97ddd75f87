"""Scaled-dot-product attention as one pair of ops, `cuxla::attention` and
`cuxla::attention_backward`: `scaled_dot_product_attention` is the pair while
AOTAutograd traces a graph (`ThePair`), and every ATen attention kernel (CPU
flash, CUDA flash, memory-efficient, cuDNN) called otherwise decomposes to
it in the compiled graphs.

PyTorch picks its kernel by device, dtype and mask, and each kernel has its
own outputs (padded log-sum-exps, sequence offsets, RNG state) that only its
own backward reads. Rewriting forward and backward to one pair keeps the graph
the same on every device: XLA runs the pair as one fused attention (below),
and eager PyTorch runs it by the math of attention where a graph falls back.

Dropout: the forward draws a seed (a random op, so XLA draws it where the
graph runs in XLA) and both halves make their dropout mask from it, so the
backward drops what the forward dropped. XLA's attention with dropout is
written out (scores, softmax, mask), as `jax.nn.dot_product_attention` has no
dropout. The CPU flash kernel's backward takes no RNG state: called with
dropout, it keeps PyTorch's kernels.

Which fused attention XLA runs on CUDA is `CUXLA_ATTENTION`'s: "cudnn" (the
default) asks XLA's CUDA compiler for cuDNN's flash attention (a custom call
it builds with cuDNN) where cuDNN takes it: float16 or bfloat16, causal or
not, a mask or none (a boolean mask goes as the additive mask it is, a
query with every position masked then given 0; a mask with a gradient stays
XLA's own), no dropout, head size a multiple of 8 up to 128 (256 from compute
capability 9.0); elsewhere, and where JAX's cuDNN checks refuse a shape,
XLA's own, said in the log. "xla" writes attention out as XLA's own ops
(scores, softmax, products), as on every other platform. JAX's checks ask
JAX's GPU client for the compute capability; while lowering they are
answered from PyTorch's current CUDA device instead, so that no JAX client
is made (lowering touches no device). cuDNN's backward reads the forward's
output and log-sum-exps, which the forward then keeps (`_cudnn_forward_given`);
XLA's own backward, in float32 or float64, reads the log-sum-exps
(`_xla_backward_from_saved`: the weights made elementwise from the scores and
log-sum-exps, no softmax again); in 16-bit types, or with dropout or a mask
that needs its gradient, it differentiates the forward run again.
XLA's own attention is `jax.nn.dot_product_attention`, except causal
attention without a mask in float32 or float64 over at least 512 positions:
that is computed a block of queries at a time, forward and backward, each
block against the keys up to its last query (`_query_blocks`), so that most
of the scores above the diagonal are neither computed nor written.

Tensors are (batch, heads, sequence, head size) as in PyTorch; the key and
value may have fewer heads than the query (grouped-query attention). A
boolean mask keeps the positions where it is True; a float mask is added to
the scores. The log-sum-exp is float32, (batch, heads, query sequence).
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import os
import threading
import types

import torch

from ._errors import one_line

aten = torch.ops.aten
log = logging.getLogger("cuxla.dynamo")

_IMPLEMENTATIONS = ("xla", "cudnn")


def implementation(platform: str) -> str:
    """The fused attention lowered for `platform`: `CUXLA_ATTENTION`'s
    choice on CUDA ("cudnn" unless set), "xla" elsewhere."""
    chosen = os.environ.get("CUXLA_ATTENTION", "cudnn") or "cudnn"
    if chosen not in _IMPLEMENTATIONS:
        raise ValueError(f"CUXLA_ATTENTION={chosen!r} is not one of {', '.join(_IMPLEMENTATIONS)}")
    return chosen if platform == "cuda" else "xla"


def _scale(query: torch.Tensor, scale: float | None) -> float:
    return scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])


def _repeat_heads(x, heads):
    groups = heads // x.shape[1]
    return x.repeat_interleave(groups, dim=1) if groups > 1 else x


def _sum_groups(grad, kv_heads):
    """The gradient of `_repeat_heads` (or of `jnp.repeat` over heads): each
    key/value head's groups summed; for PyTorch tensors and JAX arrays alike."""
    batch, heads, *rest = grad.shape
    return grad.reshape(batch, kv_heads, heads // kv_heads, *rest).sum(2)


def _scores(query, key, bias, is_causal, scale):
    """Scaled, masked scores (float32), the key's heads repeated for grouped queries."""
    key = _repeat_heads(key, query.shape[1])
    scores = (query.float() @ key.float().transpose(-1, -2)) * scale
    if is_causal:
        keep = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if bias is not None:
        scores = scores.masked_fill(~bias, float("-inf")) if bias.dtype == torch.bool else scores + bias.float()
    return scores


def _weights(query, key, bias, is_causal, scale):
    scores = _scores(query, key, bias, is_causal, scale)
    lse = torch.logsumexp(scores, dim=-1)
    # A row with every position masked attends to nothing (0), not NaN.
    return torch.exp(scores - lse.unsqueeze(-1)).nan_to_num(0.0), lse


def _heads_second(x: torch.Tensor) -> torch.Tensor:
    """(B, H, L, D) stored as (B, L, H, D): the layout of PyTorch's attention
    kernels' outputs, which the code after attention was traced against."""
    return x.transpose(1, 2).contiguous().transpose(1, 2)


def _kept(weights, dropout_p, seed):
    """The dropout factor of each weight (0 or 1 / (1 - p)), drawn from `seed`;
    1 without dropout."""
    if not dropout_p:
        return 1.0
    generator = torch.Generator(device=weights.device).manual_seed(int(seed))
    keep = torch.rand(weights.shape, generator=generator, device=weights.device) >= dropout_p
    return keep / (1.0 - dropout_p)


def _math_attention(query, key, value, bias, is_causal, scale, dropout_p, seed):
    weights, lse = _weights(query, key, bias, is_causal, scale)
    weights = weights * _kept(weights, dropout_p, seed)
    return _heads_second((weights @ _repeat_heads(value, query.shape[1]).float()).to(query.dtype)), lse


def _math_attention_backward(grad_out, query, key, value, bias, is_causal, scale, dropout_p, seed, bias_needs_grad):
    # out = (P ∘ D) V with P = softmax(S), D the dropout factors: dV = (P ∘ D)ᵀ dO,
    # dP = (dO Vᵀ) ∘ D, dS = P ∘ (dP - rowsum(dP ∘ P)), dQ = dS K · scale, dK = dSᵀ Q · scale,
    # and a float mask, added to S, has dS (summed where it was broadcast).
    heads = query.shape[1]
    weights, _ = _weights(query, key, bias, is_causal, scale)
    kept = _kept(weights, dropout_p, seed)
    value_f, key_f, grad_f = _repeat_heads(value, heads).float(), _repeat_heads(key, heads).float(), grad_out.float()
    grad_value = (weights * kept).transpose(-1, -2) @ grad_f
    grad_weights = (grad_f @ value_f.transpose(-1, -2)) * kept
    grad_scores = weights * (grad_weights - (grad_weights * weights).sum(-1, keepdim=True))
    grad_query = grad_scores @ key_f * scale
    grad_key = grad_scores.transpose(-1, -2) @ query.float() * scale
    grad_bias = grad_scores.sum_to_size(bias.shape).to(bias.dtype) if bias_needs_grad else _no_gradient(query)
    # Each gradient in its input's layout, as PyTorch's kernels give them.
    return (torch.empty_like(query).copy_(grad_query), torch.empty_like(key).copy_(_sum_groups(grad_key, key.shape[1])),
            torch.empty_like(value).copy_(_sum_groups(grad_value, value.shape[1])), grad_bias)


def _no_gradient(query):
    """The mask's gradient where none is asked for (an op returns tensors, not None)."""
    return query.new_empty((0,), dtype=torch.float32)


@torch.library.custom_op("cuxla::attention", mutates_args=())
def attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, bias: torch.Tensor | None,
              is_causal: bool, scale: float, dropout_p: float = 0.0,
              seed: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, log-sum-exp) of dropout(softmax(query keyᵀ · scale + mask)) value,
    the dropout mask drawn from `seed` (an int64 scalar)."""
    return _math_attention(query, key, value, bias, is_causal, scale, dropout_p, seed)


@attention.register_fake
def _(query, key, value, bias, is_causal, scale, dropout_p=0.0, seed=None):
    lse = query.new_empty(query.shape[:-1], dtype=torch.float32)
    return _heads_second(query.new_empty(*query.shape[:-1], value.shape[-1])), lse


@torch.library.custom_op("cuxla::attention_backward", mutates_args=())
def attention_backward(grad_out: torch.Tensor, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                       bias: torch.Tensor | None, is_causal: bool, scale: float, dropout_p: float = 0.0,
                       seed: torch.Tensor | None = None, bias_needs_grad: bool = False,
                       out: torch.Tensor | None = None, lse: torch.Tensor | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of `attention` (with the same dropout seed) for query, key,
    value and, if `bias_needs_grad`, the float mask (else an empty tensor).
    `out`, `lse`: what `attention` gave, which cuDNN's backward reads rather
    than running the forward again (elsewhere the weights are recomputed)."""
    return _math_attention_backward(grad_out, query, key, value, bias, is_causal, scale, dropout_p, seed,
                                    bias_needs_grad)


@attention_backward.register_fake
def _(grad_out, query, key, value, bias, is_causal, scale, dropout_p=0.0, seed=None, bias_needs_grad=False,
      out=None, lse=None):
    grad_bias = torch.empty_like(bias) if bias_needs_grad else _no_gradient(query)
    return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value), grad_bias


def _attention_saved(ctx, inputs, output):
    query, key, value, bias, is_causal, scale, dropout_p, seed = inputs
    ctx.bias_needs_grad = bias is not None and ctx.needs_input_grad[3]
    reads = _forward_results_read(query, dropout_p, ctx.bias_needs_grad)
    ctx.save_for_backward(query, key, value, bias, seed, *(result if read else None
                                                           for result, read in zip(output, reads)))
    ctx.is_causal, ctx.scale, ctx.dropout_p = is_causal, scale, dropout_p


def _attention_gradients(ctx, grad_out, grad_lse):
    query, key, value, bias, seed, out, lse = ctx.saved_tensors
    grads = attention_backward(grad_out, query, key, value, bias, ctx.is_causal, ctx.scale, ctx.dropout_p, seed,
                               ctx.bias_needs_grad, out, lse)
    return (*grads[:3], grads[3] if ctx.bias_needs_grad else None, None, None, None, None)


# The pair differentiated as a pair: what the forward saves is its inputs
# (and where cuDNN's backward reads them, its output and log-sum-exps), not
# the weights, as eager's fused kernels do.
attention.register_autograd(_attention_gradients, setup_context=_attention_saved)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """`torch.nn.functional.scaled_dot_product_attention` as the pair, for
    4-dimensional tensors (grouped queries taken as they come)."""
    return _forward(query, key, value, attn_mask, is_causal, scale, dropout_p)[0]


class ThePair(torch.overrides.TorchFunctionMode):
    """While AOTAutograd traces a graph, `scaled_dot_product_attention` on
    4-dimensional tensors is the pair. Left to itself, PyTorch picks one of
    its kernels there by checks that see fake tensors, and may pick its math
    path (written-out attention, whose weights the forward then saves) where
    eager runs a fused kernel. (Dynamo's graph itself stays as it is: it is
    AOTAutograd's cache key, which takes only PyTorch's own functions.)"""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch._C._nn.scaled_dot_product_attention and _the_pair_takes(*args, **kwargs):
            return scaled_dot_product_attention(*args, **kwargs)
        return func(*args, **kwargs)


def _the_pair_takes(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                    enable_gqa=False) -> bool:
    # Else PyTorch's own, its errors too (a mask given with is_causal, or
    # fewer key heads without enable_gqa).
    return all(isinstance(t, torch.Tensor) and t.dim() == 4 for t in (query, key, value)) and \
        not (attn_mask is not None and is_causal) and (enable_gqa or query.shape[1] == key.shape[1])


# ATen's kernels, forward and backward, rewritten to the pair. The seed of
# the dropout mask goes where the kernel kept its RNG state, which only its
# backward reads. A rewrite returns NotImplemented (the kernel stays) for the
# CPU flash kernel with dropout, and for a debug mask asked of the flash kernels.


def _forward(query, key, value, bias, is_causal, scale, dropout_p):
    """(output, log-sum-exp, seed of the dropout mask: 0 without dropout)."""
    seed = torch.zeros((), dtype=torch.int64, device=query.device)
    if dropout_p:
        seed = torch.randint(0, 2**62, (), dtype=torch.int64, device=query.device)
    out, lse = attention(query, key, value, bias, is_causal, _scale(query, scale), dropout_p,
                         seed if dropout_p else None)
    return out, lse, seed


def _backward(grad_out, query, key, value, bias, is_causal, scale, dropout_p, seed, out, lse,
              bias_needs_grad=False):
    """The gradients of query, key and value (and of the mask, if it needs one)."""
    reads_out, reads_lse = _forward_results_read(query, dropout_p, bias_needs_grad)
    out, lse = out if reads_out else None, lse if reads_lse else None  # kept alive for nothing otherwise
    grads = attention_backward(grad_out, query, key, value, bias, is_causal, _scale(query, scale), dropout_p,
                               seed if dropout_p else None, bias_needs_grad, out, lse)
    return grads if bias_needs_grad else grads[:3]


def _forward_results_read(query, dropout_p, bias_needs_grad) -> tuple[bool, bool]:
    """Whether the backward may read this attention's forward's output, and
    its log-sum-exps, which the forward then saves: none with dropout or a
    mask gradient; both for cuDNN's (float16 or bfloat16 on CUDA, asked for)
    backward; the log-sum-exps alone for XLA's own in float32 or float64.
    (Where cuDNN refuses after all, the output is saved unread.)"""
    if dropout_p or bias_needs_grad:
        return False, False
    chosen = implementation("cuda") if query.device.type == "cuda" else "xla"
    if chosen != "xla" and query.dtype in (torch.float16, torch.bfloat16):
        return True, True
    return False, query.dtype in (torch.float32, torch.float64)


def _flash_cpu(query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    if dropout_p:
        return NotImplemented
    return _forward(query, key, value, attn_mask, is_causal, scale, 0.0)[:2]


def _flash_cpu_backward(grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, *, attn_mask=None,
                        scale=None):
    if dropout_p:
        return NotImplemented
    return _backward(grad_out, query, key, value, attn_mask, is_causal, scale, 0.0, None, out, logsumexp)


def _efficient(query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0, is_causal=False, *, scale=None):
    out, lse, seed = _forward(query, key, value, attn_bias, is_causal, scale, dropout_p)
    return out, lse, seed, seed.clone()


def _efficient_backward(grad_out, query, key, value, attn_bias, out, logsumexp, philox_seed, philox_offset,
                        dropout_p, grad_input_mask, is_causal=False, *, scale=None):
    if attn_bias is not None and grad_input_mask[3]:
        return _backward(grad_out, query, key, value, attn_bias, is_causal, scale, dropout_p, philox_seed, out,
                         logsumexp, True)
    return (*_backward(grad_out, query, key, value, attn_bias, is_causal, scale, dropout_p, philox_seed, out,
                       logsumexp), None)


def _flash_or_cudnn(query, key, value, bias, dropout_p, is_causal, return_debug_mask, scale):
    """The flash and cuDNN kernels' outputs: theirs where only their backward
    reads them (sequence offsets and lengths, RNG state, debug mask)."""
    if return_debug_mask:
        return NotImplemented
    out, lse, seed = _forward(query, key, value, bias, is_causal, scale, dropout_p)
    offsets = query.new_empty((0,), dtype=torch.int32)
    return (out, lse, offsets, offsets.clone(), query.shape[2], key.shape[2], seed, seed.clone(),
            query.new_empty((0,)))


def _flash(query, key, value, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
    return _flash_or_cudnn(query, key, value, None, dropout_p, is_causal, return_debug_mask, scale)


def _flash_backward(grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p,
                    is_causal, philox_seed, philox_offset, *, scale=None):
    return _backward(grad_out, query, key, value, None, is_causal, scale, dropout_p, philox_seed, out, logsumexp)


def _cudnn(query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0, is_causal=False,
           return_debug_mask=False, *, scale=None):
    return _flash_or_cudnn(query, key, value, attn_bias, dropout_p, is_causal, return_debug_mask, scale)


def _cudnn_backward(grad_out, query, key, value, out, logsumexp, philox_seed, philox_offset, attn_bias, cum_seq_q,
                    cum_seq_k, max_q, max_k, dropout_p, is_causal, *, scale=None):
    return _backward(grad_out, query, key, value, attn_bias, is_causal, scale, dropout_p, philox_seed, out,
                     logsumexp)


DECOMPOSITIONS = {
    aten._scaled_dot_product_flash_attention_for_cpu.default: _flash_cpu,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default: _flash_cpu_backward,
    aten._scaled_dot_product_efficient_attention.default: _efficient,
    aten._scaled_dot_product_efficient_attention_backward.default: _efficient_backward,
    aten._scaled_dot_product_flash_attention.default: _flash,
    aten._scaled_dot_product_flash_attention_backward.default: _flash_backward,
    aten._scaled_dot_product_cudnn_attention.default: _cudnn,
    aten._scaled_dot_product_cudnn_attention_backward.default: _cudnn_backward,
}
"""ATen attention kernel -> its rewrite to the pair, for AOTAutograd's decomposition table."""


def _sequence_second(x):
    """(B, N, T, H) <-> (B, T, N, H) of a JAX array: PyTorch's layout and the
    one jax.nn's attention takes."""
    import jax.numpy as jnp

    return jnp.swapaxes(x, 1, 2)


def _jax_attention(query, key, value, bias, is_causal, scale, dropout_p=0.0, seed=None, cudnn=True, saved=None):
    """Attention's (output, log-sum-exp); `cudnn`: cuDNN's where lowering for
    it and it takes this; `saved`: (output, log-sum-exp) this gave before,
    which cuDNN's path takes as its forward's results (not run again)."""
    import jax
    import jax.numpy as jnp

    bias = _four_dimensional(bias)
    if dropout_p:
        return _jax_attention_with_dropout(query, key, value, bias, is_causal, scale, dropout_p, seed)
    mask = None
    if bias is not None and bias.dtype == jnp.bool_:
        mask, bias = bias, None
    if cudnn and query.dtype in (jnp.bfloat16, jnp.float16) and _cudnn_lowering.get():
        # A query that saw no key (log-sum-exp -inf) is given 0, a number
        # cuDNN's backward can read.
        given = None if saved is None else (saved[0], jnp.where(saved[1] == -jnp.inf, 0.0, saved[1]))
        out_lse = _cudnn_attention(query, key, value, bias, is_causal, scale, given) if mask is None else \
            _cudnn_attention_with_boolean_mask(query, key, value, mask, is_causal, scale, given)
        if out_lse is not None:
            return out_lse
    blocks = _query_blocks(query, key, bias if mask is None else mask, is_causal)
    if len(blocks) > 1:
        return _xla_attention_in_blocks(query, key, value, scale, blocks)
    out, lse = jax.nn.dot_product_attention(*map(_sequence_second, (query, key, value)), bias=bias,
                                            mask=mask, scale=scale, is_causal=is_causal, return_residual=True)
    return _sequence_second(out), _sequence_second(lse).astype(jnp.float32)


def _cudnn_attention(q, k, v, bias, is_causal, scale, given=None):
    """cuDNN's flash attention on (B, N, T, H) arrays, PyTorch's layout and
    one cuDNN reads and writes as it is (no transposes around its calls),
    with an additive bias (B or 1, N or 1, T, S) that is not differentiated,
    or none: (output, log-sum-exp (B, N, T), float32), or None where JAX's
    cuDNN checks refuse the shape. `given`: the forward's results, taken
    instead of running it (`_cudnn_forward_given`)."""
    import jax.numpy as jnp
    from jax._src.cudnn import fused_attention_stablehlo as cudnn

    if _capability() < (8, 0):
        log.info("attention runs as XLA's own ops: cuDNN's flash attention needs compute capability 8.0, "
                 "this GPU has %d.%d", *_capability())
        return None
    mask = None
    if bias is not None:
        if not hasattr(cudnn, "combine_bias_and_mask"):
            log.info("attention with a mask runs as XLA's own ops: this JAX has no combine_bias_and_mask to hand "
                     "cuDNN a mask without its gradient")
            return None
        # A mask made additive (transformers' on CUDA: the dtype's lowest
        # number) stops at JAX's own masks' number: cuDNN mishandles the
        # difference of two such numbers. A row is weighted alike either way.
        lowest = -(2.0 ** 41) if q.dtype == jnp.bfloat16 else -(2.0 ** 15)
        bias = jnp.maximum(bias.astype(q.dtype), jnp.asarray(lowest, q.dtype))
        # JAX has cuDNN write a `bias`'s gradient (a score-sized output per
        # layer; JAX 0.10 skips it if `should_export_dbias` says so, 0.11
        # never); a boolean `mask` it takes as a constant. So the bias goes in
        # as a mask of its shape, and is put back where JAX turns a mask into
        # an additive bias.
        mask = jnp.ones(bias.shape, jnp.bool_)
    # JAX's cuDNN entry rather than `jax.nn.dot_product_attention`, which
    # rounds the log-sum-exps to the output's dtype: cuDNN's backward reads
    # them as float32. (Kept from inside JAX's derivative rules instead, they
    # would belong to an inner trace: arguments the program's caller lacks.)
    mask_type = cudnn.MaskType.CAUSAL if is_causal else cudnn.MaskType.NO_MASK
    try:
        with _cudnn_checks_lock, _replaced(cudnn, "should_export_dbias", lambda *args: False), \
                _replaced(cudnn, "combine_bias_and_mask", lambda _bias, _mask, _dtype: bias), \
                _cudnn_forward_given(cudnn, given):
            out, lse = cudnn.dot_product_attention(q, k, v, mask=mask, scale=scale, mask_type=mask_type,
                                                   qkv_layout="BNTH", return_residual=True)
        return out, lse.astype(jnp.float32)
    except (NotImplementedError, ValueError, RuntimeError) as refused:
        log.info("attention of %s x %s runs as XLA's own ops: cuDNN's path refused it: %s", tuple(q.shape), q.dtype,
                 one_line(refused))
        return None


def _cudnn_attention_with_boolean_mask(q, k, v, mask, is_causal, scale, given=None):
    """`_cudnn_attention` with a boolean mask (B or 1, N or 1, T, S), as the
    additive mask it is; a query whose every position is masked attends to
    nothing (output 0, log-sum-exp -inf, as PyTorch's), where cuDNN would
    weigh every position alike."""
    import jax.numpy as jnp

    out_lse = _cudnn_attention(q, k, v, jnp.where(mask, 0.0, -jnp.inf).astype(q.dtype), is_causal, scale, given)
    if out_lse is None:
        return None
    if is_causal:
        mask = mask & jnp.tril(jnp.ones(mask.shape[-2:], jnp.bool_))
    attends = jnp.any(mask, axis=-1)  # (B or 1, N or 1, T), as the log-sum-exp
    out, lse = out_lse
    return jnp.where(attends[..., None], out, jnp.zeros((), out.dtype)), jnp.where(attends, lse, -jnp.inf)


@contextlib.contextmanager
def _cudnn_forward_given(cudnn, given):
    """With `given` (the forward's output and log-sum-exps as cuDNN gave
    them), JAX's cuDNN forward primitive is not run and `given` stands for its
    results: a derivative then runs cuDNN's backward on the forward's saved
    output and log-sum-exps, as PyTorch's fused kernels do, instead of running
    the forward again. Without `given` (or in a JAX without that primitive)
    nothing is replaced."""
    if given is None:
        yield
        return
    with _replaced(cudnn, "_dot_product_attention_fwd_p_wrapper",
                   types.SimpleNamespace(bind=lambda *args, **params: tuple(given))):
        yield


@contextlib.contextmanager
def _replaced(module, name: str, value):
    """`module.name` is `value` inside, if the module has that name."""
    if not hasattr(module, name):
        yield
        return
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, original)


def _capability() -> tuple[int, int]:
    """PyTorch's current CUDA device's compute capability; (0, 0) without one."""
    return tuple(torch.cuda.get_device_capability()) if torch.cuda.is_available() else (0, 0)


_cudnn_lowering: contextvars.ContextVar[bool] = contextvars.ContextVar("cudnn_lowering", default=False)
_cudnn_checks_lock = threading.RLock()


@contextlib.contextmanager
def lowering_for_cuda():
    """Lowering for CUDA, where attention takes cuDNN's path if asked:
    JAX's cuDNN checks are then answered from PyTorch's current CUDA
    device's compute capability, not from JAX's GPU client (a JAX whose
    checks are not those two functions keeps XLA's own attention)."""
    chosen = implementation("cuda")
    if chosen == "xla":
        yield
        return
    with _cudnn_checks_from_torch() as answered:
        token = _cudnn_lowering.set(answered)
        try:
            yield
        finally:
            _cudnn_lowering.reset(token)


@contextlib.contextmanager
def _cudnn_checks_from_torch():
    """JAX's two compute-capability checks, answered from PyTorch's device
    (one lowering at a time); gives whether both were there to answer."""
    from jax._src.cudnn import fused_attention_stablehlo as checks

    def parsed(capability: str) -> tuple[int, ...]:
        return tuple(int(x) for x in capability.split("."))

    answers = {"check_compute_capability": lambda capability: _capability() >= parsed(capability),
               "is_cuda_compute_capability_equal": lambda capability: _capability() == parsed(capability)}
    with _cudnn_checks_lock, contextlib.ExitStack() as answering:
        missing = sorted(name for name in answers if not hasattr(checks, name))
        if missing:
            log.info("attention runs as XLA's own ops: this JAX has no %s to answer", ", ".join(missing))
        for name, answer in answers.items():
            answering.enter_context(_replaced(checks, name, answer))
        yield not missing


def _jax_attention_with_dropout(query, key, value, bias, is_causal, scale, dropout_p, seed):
    import jax
    import jax.numpy as jnp

    key, value = _repeated_keys(query, key, value)
    scores = jnp.einsum("bnth,bnsh->bnts", query.astype(jnp.float32), key.astype(jnp.float32)) * scale
    if is_causal:
        scores = jnp.where(jnp.tril(jnp.ones(scores.shape[-2:], jnp.bool_)), scores, -jnp.inf)
    if bias is not None:
        scores = jnp.where(bias, scores, -jnp.inf) if bias.dtype == jnp.bool_ else scores + bias
    lse = jax.nn.logsumexp(scores, axis=-1)
    weights = jnp.nan_to_num(jnp.exp(scores - lse[..., None]))
    keep = jax.random.bernoulli(jax.random.PRNGKey(seed), 1.0 - dropout_p, weights.shape)
    weights = jnp.where(keep, weights / (1.0 - dropout_p), 0.0)
    out = jnp.einsum("bnts,bnsh->bnth", weights, value.astype(jnp.float32))
    return out.astype(query.dtype), lse


def _jax_attention_backward(grad_out, query, key, value, bias, is_causal, scale, dropout_p=0.0, seed=None,
                            bias_needs_grad=False, out=None, lse=None):
    import jax
    import jax.numpy as jnp

    saved = None if out is None or lse is None else (out, lse)
    # cuDNN's first where it may take it (the derivative below), as in the forward.
    cudnn = query.dtype in (jnp.bfloat16, jnp.float16) and _cudnn_lowering.get()
    if lse is not None and not cudnn and not dropout_p and not bias_needs_grad and query.dtype in _FULL_LSE_DTYPES:
        grads = _xla_backward_from_saved(grad_out, query, key, value, bias, is_causal, scale, lse)
        return (*grads, jnp.zeros((0,), jnp.float32))

    def output(q, k, v, b=bias):  # a mask's gradient is XLA's own attention's: cuDNN's is not asked of it
        return _jax_attention(q, k, v, b, is_causal, scale, dropout_p, seed, cudnn=not bias_needs_grad,
                              saved=saved)[0]

    # The mask is differentiated only where its gradient is asked for.
    _, vjp = jax.vjp(output, query, key, value, *([bias] if bias_needs_grad else []))
    grads = vjp(grad_out)
    return grads if bias_needs_grad else (*grads, jnp.zeros((0,), jnp.float32))


# XLA's own attention keeps its log-sum-exps in the inputs' dtype: exact enough
# to make the weights from in these.
_FULL_LSE_DTYPES = ("float32", "float64")

# Causal attention of at least two blocks of this many queries is computed a
# block of queries at a time, each against the keys up to its last query only:
# the scores above the diagonal's blocks are never computed nor written (at 4
# blocks, 3/8 of them), in the forward and the backward alike.
_CAUSAL_BLOCK_MIN = 256
_CAUSAL_BLOCKS_MAX = 8


def _query_blocks(query, key, bias, is_causal):
    """(first query, end of queries, end of keys) of each block XLA's own
    attention is computed in: one block, all queries against all keys, unless
    the attention is causal, unmasked, square, in float32 or float64 (where
    the backward makes its weights from the saved log-sum-exps), and long."""
    length, keys = query.shape[2], key.shape[2]
    count = min(_CAUSAL_BLOCKS_MAX, length // _CAUSAL_BLOCK_MIN)
    if not is_causal or bias is not None or length != keys or count < 2 or query.dtype not in _FULL_LSE_DTYPES:
        return [(0, length, keys)]
    size = -(-length // count)
    return [(first, min(first + size, length), min(first + size, length)) for first in range(0, length, size)]


# Masked as `jax.nn.dot_product_attention` masks: a large negative score, not -inf.
_MASKED_SCORE = -0.7 * torch.finfo(torch.float32).max


def _masked_scores(queries, keys, bias, is_causal, first_query, scale, exact):
    """A block of queries' scores against a prefix of the keys, in `exact`,
    with what they keep (None: all), the causal diagonal starting at
    `first_query`."""
    import jax.numpy as jnp

    scores = jnp.einsum("bnth,bnsh->bnts", queries, keys, preferred_element_type=exact) * scale
    keep = None
    bias = _four_dimensional(bias)
    if bias is not None:
        if bias.dtype == jnp.bool_:
            keep = bias
        else:
            scores = scores + bias.astype(exact)
    if is_causal:
        causal = jnp.tril(jnp.ones(scores.shape[-2:], jnp.bool_), first_query)
        keep = causal if keep is None else keep & causal
    if keep is not None:
        scores = jnp.where(keep, scores, jnp.asarray(_MASKED_SCORE, exact))
    return scores, keep


def _four_dimensional(bias):
    """A mask (None, or broadcastable to (B, N, T, S)) with leading 1s to four dimensions."""
    return None if bias is None else bias.reshape((1,) * (4 - bias.ndim) + bias.shape)


def _repeated_keys(q, k, v):
    """The key and value, each head repeated for its group of query heads."""
    import jax.numpy as jnp

    groups = q.shape[1] // k.shape[1]
    return tuple(jnp.repeat(x, groups, axis=1) if groups > 1 else x for x in (k, v))


def _xla_attention_in_blocks(q, k, v, scale, blocks):
    """Causal attention's (output, log-sum-exp) a block of queries at a time
    (`_query_blocks`), each block's softmax over the keys it sees."""
    import jax
    import jax.numpy as jnp

    exact = jnp.promote_types(q.dtype, jnp.float32)
    keys, values = _repeated_keys(q, k, v)
    outs, lses = [], []
    for first, end, key_end in blocks:
        scores, _ = _masked_scores(q[:, :, first:end], keys[:, :, :key_end], None, True, first, scale, exact)
        lse = jax.nn.logsumexp(scores, axis=-1)
        weights = jnp.exp(scores - lse[..., None])
        outs.append(jnp.einsum("bnts,bnsh->bnth", weights, values[:, :, :key_end].astype(exact)))
        lses.append(lse)
    return jnp.concatenate(outs, axis=2).astype(q.dtype), jnp.concatenate(lses, axis=2).astype(jnp.float32)


def _xla_backward_from_saved(grad_out, q, k, v, bias, is_causal, scale, lse):
    """XLA's own attention's gradients for the query, key and value from the
    forward's log-sum-exps: the weights made elementwise from the scores and
    log-sum-exps (no softmax, no row maximum, again), the scores masked as
    `jax.nn.dot_product_attention` masks them, so that the weights are its
    forward's; in the forward's blocks of queries (`_query_blocks`)."""
    import jax.numpy as jnp

    exact = jnp.promote_types(q.dtype, jnp.float32)  # the scores' dtype, as JAX's forward has them
    keys, values = _repeated_keys(q, k, v)
    grad_f = grad_out.astype(exact)
    grad_queries, grad_keys, grad_values = [], None, None
    for first, end, key_end in _query_blocks(q, k, bias, is_causal):
        queries, block_keys = q[:, :, first:end], keys[:, :, :key_end]
        scores, keep = _masked_scores(queries, block_keys, bias, is_causal, first, scale, exact)
        weights = jnp.exp(scores - lse[:, :, first:end].astype(exact)[..., None])
        if keep is not None:  # a row with every score masked weighs its keys alike, as JAX's softmax of it does
            weights = jnp.where(jnp.any(keep, axis=-1, keepdims=True), weights, 1.0 / scores.shape[-1])
        grad_block = grad_f[:, :, first:end]
        grad_weights = jnp.einsum("bnth,bnsh->bnts", grad_block, values[:, :, :key_end].astype(exact))
        row_sums = jnp.sum(grad_weights * weights, axis=-1, keepdims=True)
        grad_scores = weights * (grad_weights - row_sums) * scale
        if keep is not None:  # a masked score is a constant: no gradient through it (a wholly masked row's too)
            grad_scores = jnp.where(keep, grad_scores, 0.0)
        grad_queries.append(jnp.einsum("bnts,bnsh->bnth", grad_scores, block_keys.astype(exact)))
        grad_keys = _plus_prefix(grad_keys, jnp.einsum("bnts,bnth->bnsh", grad_scores, queries.astype(exact)),
                                 keys.shape[2])
        grad_values = _plus_prefix(grad_values, jnp.einsum("bnts,bnth->bnsh", weights, grad_block), keys.shape[2])

    return jnp.concatenate(grad_queries, axis=2).astype(q.dtype), \
        _sum_groups(grad_keys, k.shape[1]).astype(k.dtype), _sum_groups(grad_values, v.shape[1]).astype(v.dtype)


def _plus_prefix(total, part, length):
    """`total` (None: zeros) plus `part`, the gradient of a prefix of the
    `length` keys, zero beyond it."""
    import jax.numpy as jnp

    if part.shape[2] < length:
        part = jnp.pad(part, ((0, 0), (0, 0), (0, length - part.shape[2]), (0, 0)))
    return part if total is None else total + part


LOWERINGS = {
    torch.ops.cuxla.attention.default: _jax_attention,
    torch.ops.cuxla.attention_backward.default: _jax_attention_backward,
}
"""The pair's JAX lowerings (functions of JAX arrays), added to torchax's ops."""
