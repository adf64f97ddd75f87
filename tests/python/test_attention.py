"""Attention in compiled graphs: every ATen attention kernel rewrites to
cuxla's pair, which XLA runs as one fused attention and eager PyTorch by its
math; outputs and gradients match PyTorch's own attention."""
import pytest
import torch
import torch.nn.functional as F

import cuxla
import cuxla.dynamo
from cuxla import _attention

aten = torch.ops.aten

# (query heads, key/value heads, mask kind, causal)
CASES = {
    "plain": (4, 4, None, False),
    "causal": (4, 4, None, True),
    "bool mask": (4, 4, "bool", False),
    "float mask": (4, 4, "float", False),
    "grouped queries, causal": (4, 2, None, True),
}


def _inputs(heads, kv_heads, mask_kind, device="cpu", dtype=torch.float32):
    torch.manual_seed(0)
    q = torch.randn(2, heads, 6, 8, device=device, dtype=dtype)
    k, v = (torch.randn(2, kv_heads, 7, 8, device=device, dtype=dtype) for _ in range(2))
    mask = None
    if mask_kind == "bool":
        mask = torch.rand(2, 1, 6, 7, device=device) > 0.3
        mask[..., 0] = True  # every query sees a key
    elif mask_kind == "float":
        mask = torch.randn(6, 7, device=device, dtype=dtype)
    return q, k, v, mask


def _reference(q, k, v, mask, causal):
    """PyTorch's attention, by its math kernel, and its gradients."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                             enable_gqa=q.shape[1] != k.shape[1])
    grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    return out.detach(), grads


@pytest.mark.parametrize("case", CASES)
def test_compiled_attention_is_one_xla_program_matching_pytorch(client, case):
    device = "cuda" if client.platform == "cuda" else "cpu"
    heads, kv_heads, mask_kind, causal = CASES[case]
    q, k, v, mask = _inputs(heads, kv_heads, mask_kind, device)
    expected, expected_grads = _reference(q, k, v, mask, causal)

    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                              enable_gqa=heads != kv_heads)

    torch._dynamo.reset()
    cuxla.dynamo.reset_report()
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = torch.compile(attention, backend="cuxla")(q, k, v)
    grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    report = cuxla.dynamo.report()
    assert report["xla_programs"] == report["graphs"] == 2 and report["xla_ops"] == report["aten_ops"], report


def test_attention_is_the_pair_whichever_kernel_pytorch_would_pick_while_tracing(monkeypatch):
    # On CUDA PyTorch's checks of fake tensors picked its math path for a float32 masked attention (the
    # forward then saved the weights); here the math path is forced while compiling.
    graphs = []
    compile_graph = cuxla.dynamo._compile_graph

    def seen(gm, example_inputs, *options):
        graphs.append({str(n.target) for n in gm.graph.nodes if n.op == "call_function"})
        return compile_graph(gm, example_inputs, *options)

    monkeypatch.setattr(cuxla.dynamo, "_compile_graph", seen)
    monkeypatch.setenv("CUXLA_CACHE_DIR", "")  # compiled here, not run from a cached program
    q, k, v, mask = _inputs(4, 4, "float")
    expected, expected_grads = _reference(q, k, v, mask, False)
    torch._dynamo.reset()
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        out = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                            backend="cuxla")(q, k, v)
    grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    forward, backward = graphs
    assert "cuxla.attention.default" in forward and "cuxla.attention_backward.default" in backward
    assert not any("bmm" in target or "softmax" in target for target in forward | backward), graphs
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def _rewrite(kernel):
    return _attention.DECOMPOSITIONS[kernel.default]


@pytest.mark.parametrize("case", CASES)
def test_every_attention_kernel_rewrites_to_the_same_attention(case):
    # The CUDA kernels' rewrites run anywhere (their eager form is the math):
    # each forward gives PyTorch's output, each backward its gradients.
    heads, kv_heads, mask_kind, causal = CASES[case]
    q, k, v, mask = _inputs(heads, kv_heads, mask_kind)
    expected, (gq, gk, gv) = _reference(q, k, v, mask, causal)
    grad_out = torch.ones_like(expected)
    outputs = {
        "cpu flash": _rewrite(aten._scaled_dot_product_flash_attention_for_cpu)(q, k, v, 0.0, causal, attn_mask=mask),
        "efficient": _rewrite(aten._scaled_dot_product_efficient_attention)(q, k, v, mask, True, 0.0, causal),
        "cudnn": _rewrite(aten._scaled_dot_product_cudnn_attention)(q, k, v, mask, True, 0.0, causal),
    }
    if mask is None:  # the flash kernel takes no mask
        outputs["flash"] = _rewrite(aten._scaled_dot_product_flash_attention)(q, k, v, 0.0, causal)
    for name, result in outputs.items():
        torch.testing.assert_close(result[0], expected, rtol=1e-5, atol=1e-5, msg=name)
    lse = outputs["efficient"][1]
    backward = {
        "cpu flash": _rewrite(aten._scaled_dot_product_flash_attention_for_cpu_backward)(
            grad_out, q, k, v, expected, lse, 0.0, causal, attn_mask=mask),
        "efficient": _rewrite(aten._scaled_dot_product_efficient_attention_backward)(
            grad_out, q, k, v, mask, expected, lse, lse, lse, 0.0, [True, True, True, False], causal)[:3],
    }
    if mask is None:
        backward["flash"] = _rewrite(aten._scaled_dot_product_flash_attention_backward)(
            grad_out, q, k, v, expected, lse, lse, lse, 6, 7, 0.0, causal, lse, lse)
    for name, grads in backward.items():
        for got, want in zip(grads, (gq, gk, gv)):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=name)


def _bias_attention(q, k, v, bias):
    """The memory-efficient kernel with a float mask that needs a gradient
    (a learned position bias), as PyTorch's attention calls it on CUDA."""
    return aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, 0.0)[0]


@pytest.mark.parametrize("bias_shape", [(2, 4, 6, 7), (1, 4, 6, 7)], ids=["full", "broadcast over the batch"])
def test_a_mask_that_needs_a_gradient_gets_it_in_xla(bias_shape):
    # The kernel has no CPU implementation: what runs here is the rewrite, in XLA.
    q, k, v, _ = _inputs(4, 4, None)
    bias = torch.randn(bias_shape)
    leaves = [t.detach().requires_grad_() for t in (q, k, v, bias)]
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(*leaves)
    expected_grads = torch.autograd.grad(expected, leaves, torch.ones_like(expected))
    torch._dynamo.reset()
    cuxla.dynamo.reset_report()
    leaves = [t.detach().requires_grad_() for t in (q, k, v, bias)]
    out = torch.compile(_bias_attention, backend="cuxla")(*leaves)
    grads = torch.autograd.grad(out, leaves, torch.ones_like(out))
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    for name, got, want in zip("qkv", grads, expected_grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=name)
    torch.testing.assert_close(grads[3], expected_grads[3], rtol=1e-4, atol=1e-5, msg="mask")
    report = cuxla.dynamo.report()
    assert report["xla_programs"] == report["graphs"] == 2 and report["xla_ops"] == report["aten_ops"], report


def test_a_mask_that_needs_a_gradient_gets_it_in_pytorch():
    # The rewrite's eager form (where a graph falls back), against autograd through the math kernel.
    q, k, v, _ = _inputs(4, 2, None)
    bias = torch.randn(1, 4, 6, 7, requires_grad=True)
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, enable_gqa=True)
    (expected_grad,) = torch.autograd.grad(expected, bias, torch.ones_like(expected))
    out, lse, seed, offset = _rewrite(aten._scaled_dot_product_efficient_attention)(q, k, v, bias, True)
    grads = _rewrite(aten._scaled_dot_product_efficient_attention_backward)(
        torch.ones_like(out), q, k, v, bias, out, lse, seed, offset, 0.0, [True, True, True, True])
    assert len(grads) == 4 and grads[3].shape == bias.shape
    torch.testing.assert_close(grads[3], expected_grad, rtol=1e-4, atol=1e-5)


def test_the_cpu_flash_kernel_with_dropout_stays():
    # Its backward takes no RNG state to draw the forward's mask again.
    q, k, v, _ = _inputs(4, 4, None)
    assert _rewrite(aten._scaled_dot_product_flash_attention_for_cpu)(q, k, v, 0.1) is NotImplemented


def _dropped_attention(runs_in_xla: bool, p: float = 0.5):
    """Attention with dropout through the memory-efficient kernel's rewrite,
    on a value that is the identity, so that the output is the dropped-out
    attention weights themselves; and the value's gradient."""
    torch.manual_seed(0)
    q, k = torch.randn(2, 2, 8, 16), torch.randn(2, 2, 16, 16)
    v = torch.eye(16).expand(2, 2, 16, 16).clone().requires_grad_()

    def attention(q, k, v):
        return aten._scaled_dot_product_efficient_attention(q, k, v, None, True, p)[0]

    if runs_in_xla:
        torch._dynamo.reset()
        cuxla.dynamo.reset_report()
        attention = torch.compile(attention, backend="cuxla")
    weights = attention(q, k, v)
    (grad_v,) = torch.autograd.grad(weights.sum(), v)
    return weights.detach(), grad_v, _softmax_weights(q, k)


def _softmax_weights(q, k):
    return torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)


@pytest.mark.parametrize("runs_in_xla", [True, False], ids=["XLA", "eager rewrite"])
def test_dropout_in_attention_drops_the_same_weights_forward_and_backward(runs_in_xla):
    if runs_in_xla:
        weights, grad_v, softmax = _dropped_attention(True)
        report = cuxla.dynamo.report()
        assert report["xla_programs"] == report["graphs"] == 2 and report["xla_ops"] == report["aten_ops"], report
    else:  # the rewrite's eager form (PyTorch has no CPU kernel for this one)
        rewrite = _rewrite(aten._scaled_dot_product_efficient_attention)
        backward = _rewrite(aten._scaled_dot_product_efficient_attention_backward)
        torch.manual_seed(0)
        q, k = torch.randn(2, 2, 8, 16), torch.randn(2, 2, 16, 16)
        v = torch.eye(16).expand(2, 2, 16, 16).contiguous()
        weights, lse, seed, offset = rewrite(q, k, v, None, True, 0.5)
        grad_v = backward(torch.ones_like(weights), q, k, v, None, weights, lse, seed, offset, 0.5,
                          [True, True, True, False])[2]
        softmax = _softmax_weights(q, k)
    dropped = (weights == 0).float().mean().item()
    assert 0.35 < dropped < 0.65, f"{dropped:.2f} of the weights dropped at p = 0.5"
    kept = weights != 0
    torch.testing.assert_close(weights[kept], 2 * softmax[kept], msg="kept weights scaled by 1 / (1 - p)")
    # d(sum of weights)/dV[s, j] is the dropped-out weight column s summed: the backward's mask is the forward's.
    torch.testing.assert_close(grad_v[..., 0], weights.sum(dim=-2), rtol=1e-5, atol=1e-5)


def test_dropout_in_attention_draws_anew_each_call_and_repeats_under_a_seed():
    first, _, _ = _dropped_attention(True)
    again, _, _ = _dropped_attention(True)
    assert torch.equal(first, again), "torch.manual_seed(0) gave the same mask"
    q, k, v = torch.randn(1, 2, 8, 16), torch.randn(1, 2, 16, 16), torch.randn(1, 2, 16, 16)
    attention = torch.compile(lambda q, k, v: aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.5)[0],
                              backend="cuxla")
    assert not torch.equal(attention(q, k, v), attention(q, k, v)), "the next call drew a new mask"


def test_a_fully_masked_row_attends_to_nothing():
    q, k, v, _ = _inputs(4, 4, None)
    mask = torch.ones(6, 7, dtype=torch.bool)
    mask[2] = False
    out, _ = _attention.attention(q, k, v, mask, False, 0.35)
    assert torch.isfinite(out).all() and torch.equal(out[:, :, 2], torch.zeros_like(out[:, :, 2]))


def _lowered_for_cuda(dtype, causal=True, masked=False, additive=False, mask_gradient=False):
    """The StableHLO of attention's forward and backward lowered for CUDA
    (grouped queries, 64-wide heads; a boolean mask if `masked`, an additive
    one of (batch, 1, sequence, sequence) as transformers gives on CUDA if
    `additive`, its gradient asked if `mask_gradient`), as cuxla lowers a graph."""
    import jax
    import jax.numpy as jnp

    from cuxla import _torchax

    def forward_and_backward(q, k, v, g, mask):
        out, lse = _attention._jax_attention(q, k, v, mask, causal, 0.125)
        return out, _attention._jax_attention_backward(g, q, k, v, mask, causal, 0.125, bias_needs_grad=mask_gradient,
                                                       out=out, lse=lse)

    queries = jax.ShapeDtypeStruct((2, 8, 128, 64), dtype)
    keys = jax.ShapeDtypeStruct((2, 2, 128, 64), dtype)
    mask = (jax.ShapeDtypeStruct((128, 128), jnp.bool_) if masked else
            jax.ShapeDtypeStruct((2, 1, 128, 128), dtype) if additive else None)
    _torchax.environment()
    with _torchax.lowering_context("cuda"):
        return jax.jit(forward_and_backward).trace(queries, keys, keys, queries, mask).lower(
            lowering_platforms=("cuda",)).as_text()


@pytest.fixture
def a_hopper_gpu_with_cudnn(monkeypatch):
    """JAX's cuDNN checks as on an H100 with cuDNN 9.10, where this machine
    may have neither; JAX's own GPU client must never be asked for."""
    from jax._src import xla_bridge
    from jax._src.cudnn import fused_attention_stablehlo

    monkeypatch.setattr(fused_attention_stablehlo, "check_cudnn_version", lambda: 91000)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")

    def no_jax_client(*args, **kwargs):
        raise AssertionError("lowering asked JAX for its GPU client")

    monkeypatch.setattr(xla_bridge, "get_backend", no_jax_client)
    monkeypatch.setattr(xla_bridge, "local_devices", no_jax_client)


def test_cudnn_attention_is_lowered_for_cuda_by_default(monkeypatch, a_hopper_gpu_with_cudnn):
    import jax.numpy as jnp

    monkeypatch.delenv("CUXLA_ATTENTION", raising=False)
    assert _attention.implementation("cuda") == "cudnn"
    text = _lowered_for_cuda(jnp.bfloat16)
    assert "__cudnn$fmhaSoftmax" in text and "__cudnn$fmhaSoftmaxBackward" in text
    # A boolean mask (transformers' on CUDA) goes as the additive mask it is.
    assert "__cudnn$fmhaScaleBiasSoftmax(" in _lowered_for_cuda(jnp.bfloat16, masked=True)
    # Where cuDNN does not take it: float32, or not asked for.
    assert "__cudnn$fmha" not in _lowered_for_cuda(jnp.float32)
    monkeypatch.setenv("CUXLA_ATTENTION", "xla")
    assert "__cudnn$fmha" not in _lowered_for_cuda(jnp.bfloat16)
    assert _attention.implementation("cuda") == "xla"


def test_cudnn_attention_takes_an_additive_mask_and_writes_no_gradient_for_it(monkeypatch, a_hopper_gpu_with_cudnn):
    # JAX 0.10 asks `should_export_dbias` whether to write a bias's gradient; 0.11 (the GPU machine's) has no
    # such function and writes one for every `bias`, none for a boolean `mask`: each JAX is its own case.
    import re

    import jax.numpy as jnp

    monkeypatch.setenv("CUXLA_ATTENTION", "cudnn")
    text = _lowered_for_cuda(jnp.bfloat16, causal=False, additive=True)
    assert "__cudnn$fmhaScaleBiasSoftmax(" in text
    # The backward's results: the query's, key's and value's gradients and cuDNN's workspace; no mask's gradient.
    assert re.findall(r"%\S+:(\d+) = stablehlo.custom_call @__cudnn\$fmhaScaleBiasSoftmaxBackward", text) == ["4"]
    # A mask with a gradient: the backward is XLA's own.
    text = _lowered_for_cuda(jnp.bfloat16, causal=False, additive=True, mask_gradient=True)
    assert "__cudnn$fmhaScaleBiasSoftmax(" in text and "Backward" not in text


@pytest.mark.parametrize("mask", [None, "boolean", "additive"])
def test_cudnn_attention_lowers_to_programs_of_their_inputs_alone(a_hopper_gpu_with_cudnn, mask):
    # The forward, and the backward from the forward's saved output and log-sum-exps, each lowered alone: a value
    # kept from inside JAX's derivative rules would become an argument of the program that no caller passes, and
    # a transpose a copy of each tensor cuDNN reads or writes.
    import re

    import jax
    import jax.numpy as jnp

    from cuxla import _torchax

    queries = jax.ShapeDtypeStruct((2, 8, 128, 64), jnp.bfloat16)
    keys = jax.ShapeDtypeStruct((2, 2, 128, 64), jnp.bfloat16)
    lse = jax.ShapeDtypeStruct((2, 8, 128), jnp.float32)
    masks = {None: (), "boolean": (jax.ShapeDtypeStruct((128, 128), jnp.bool_),),
             "additive": (jax.ShapeDtypeStruct((2, 1, 128, 128), jnp.bfloat16),)}[mask]

    def forward(q, k, v, *mask):
        return _attention._jax_attention(q, k, v, *(mask or (None,)), True, 0.125)

    def backward(g, q, k, v, out, lse, *mask):
        return _attention._jax_attention_backward(g, q, k, v, *(mask or (None,)), True, 0.125, out=out, lse=lse)

    _torchax.environment()
    for function, inputs, kernel in [(forward, (queries, keys, keys, *masks), "@__cudnn$fmha"),
                                     (backward, (queries, queries, keys, keys, queries, lse, *masks), "Backward(")]:
        with _torchax.lowering_context("cuda"):
            text = jax.jit(function).trace(*inputs).lower(lowering_platforms=("cuda",)).as_text()
        assert kernel in text
        # cuDNN reads and writes PyTorch's (B, N, T, H) as it is: nothing to transpose around its calls (JAX
        # writes transposes that keep every axis in place, which XLA drops).
        permutations = [[int(d) for d in dims.split(",")]
                        for dims in re.findall(r"stablehlo\.transpose %\S+, dims = \[([\d, ]+)\]", text)]
        assert all(p == sorted(p) for p in permutations), f"{function.__name__} transposes: {permutations}"
        arguments = re.search(r"func.func public @main\((.*?)\) ->", text).group(1).count("%arg")
        assert arguments == len(inputs), f"{function.__name__} lowered to {arguments} arguments for {len(inputs)}"


@pytest.fixture
def cudnn_kernels_run_by_xla(monkeypatch):
    """cuDNN's forward and backward kernels (JAX's two primitives) faked by
    the math of attention on what JAX hands them, run by JAX on the CPU: the
    backward, as cuDNN's, from the forward's output and log-sum-exps. Gives
    the calls made: ("forward" or "backward", what JAX asked it to write
    (`variadic_args`: whether a mask's gradient is among it))."""
    import types

    import jax
    import jax.numpy as jnp
    from jax._src.cudnn import fused_attention_stablehlo as cudnn

    monkeypatch.setattr(cudnn, "check_cudnn_version", lambda: 91000)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    calls = []

    def scores(query, key, bias, scale, mask_type):  # (B, T, N, H), (B, S, K, H) -> (B, N, T, S), float32
        key = jnp.repeat(key, query.shape[2] // key.shape[2], axis=2)
        s = jnp.einsum("btnh,bsnh->bnts", query.astype(jnp.float32), key.astype(jnp.float32)) * scale
        s = s if bias is None or bias.size == 0 else s + bias.astype(jnp.float32)  # no bias: an empty array
        if mask_type in (cudnn.MaskType.CAUSAL, cudnn.MaskType.PADDING_CAUSAL):
            s = jnp.where(jnp.tril(jnp.ones(s.shape[-2:], jnp.bool_)), s, -jnp.inf)
        return s

    def as_btnh(layout, *arrays):  # the layout JAX says it hands cuDNN -> (B, T, N, H), and back
        return arrays if layout == cudnn.AttentionLayout.BTNH.value else tuple(jnp.swapaxes(x, 1, 2) for x in arrays)

    def forward(query, key, value, bias, *_, scale, variadic_args, mask_type, is_training, layout, **__):
        calls.append(("forward", variadic_args))
        query, key, value = as_btnh(layout, query, key, value)
        s = scores(query, key, bias, scale, mask_type)
        lse = jax.nn.logsumexp(s, axis=-1)  # (B, N, T), as cuDNN's
        value = jnp.repeat(value, query.shape[2] // value.shape[2], axis=2).astype(jnp.float32)
        (out,) = as_btnh(layout, jnp.einsum("bnts,bsnh->btnh", jnp.exp(s - lse[..., None]), value).astype(query.dtype))
        return (out, lse) if is_training else (out,)

    def backward(query, key, value, bias, *rest, scale, variadic_args, mask_type, layout, **_):
        calls.append(("backward", variadic_args))
        lse, out, grad_out = rest[6:9]
        query, key, value, out, grad_out = as_btnh(layout, query, key, value, out, grad_out)
        groups = query.shape[2] // key.shape[2]
        p = jnp.exp(scores(query, key, bias, scale, mask_type) - lse[..., None])
        grad_out, out = grad_out.astype(jnp.float32), out.astype(jnp.float32)
        key_f, value_f = (jnp.repeat(x, groups, axis=2).astype(jnp.float32) for x in (key, value))
        grad_p = jnp.einsum("btnh,bsnh->bnts", grad_out, value_f)
        grad_s = p * (grad_p - jnp.swapaxes(jnp.sum(grad_out * out, axis=-1), 1, 2)[..., None])
        grad_q = jnp.einsum("bnts,bsnh->btnh", grad_s, key_f) * scale
        grad_k = jnp.einsum("bnts,btnh->bsnh", grad_s, query.astype(jnp.float32)) * scale
        grad_v = jnp.einsum("bnts,btnh->bsnh", p, grad_out)
        summed = (g.reshape(*g.shape[:2], -1, groups, g.shape[-1]).sum(3) for g in (grad_k, grad_v))
        return as_btnh(layout, grad_q.astype(query.dtype), *(g.astype(key.dtype) for g in summed))

    monkeypatch.setattr(cudnn, "_dot_product_attention_fwd_p_wrapper", types.SimpleNamespace(bind=forward))
    monkeypatch.setattr(cudnn, "_dot_product_attention_bwd_p_wrapper", types.SimpleNamespace(bind=backward))
    return calls


def test_cudnn_attention_is_handed_the_additive_mask_as_a_constant(cudnn_kernels_run_by_xla):
    # The result is attention with the mask added (as clamped), and JAX asks for no gradient of it.
    import jax
    import jax.numpy as jnp

    def attention(*args, **kwargs):  # jax.nn's, of (B, N, T, H) arrays as cuDNN's path takes them
        return jnp.swapaxes(jax.nn.dot_product_attention(*(jnp.swapaxes(x, 1, 2) for x in args), **kwargs), 1, 2)

    calls = cudnn_kernels_run_by_xla
    q, k, v = (jax.random.normal(jax.random.PRNGKey(i), (2, 4, 16, 8), jnp.bfloat16) for i in range(3))
    mask = jax.random.normal(jax.random.PRNGKey(3), (2, 1, 16, 16), jnp.bfloat16)
    mask = mask.at[:, :, :, -3:].set(jnp.finfo(jnp.bfloat16).min)  # transformers' masked positions
    with _attention._cudnn_checks_from_torch():
        out, _ = _attention._cudnn_attention(q, k, v, mask, False, 0.25)
    expected = attention(q, k, v, bias=jnp.maximum(mask, -(2.0 ** 41)), scale=0.25)
    assert calls == [("forward", (True, False))]
    assert jnp.allclose(out.astype(jnp.float32), expected.astype(jnp.float32), atol=1e-2)
    unmasked = attention(q, k, v, scale=0.25)
    assert not jnp.allclose(out.astype(jnp.float32), unmasked.astype(jnp.float32), atol=1e-2)


@pytest.mark.parametrize("causal", [False, True])
def test_cudnn_attention_with_a_boolean_mask_gives_a_fully_masked_query_nothing(cudnn_kernels_run_by_xla, causal):
    # cuDNN would weigh every key alike for a query that may see none; PyTorch gives it 0 (and a log-sum-exp of -inf).
    import jax
    import jax.numpy as jnp

    q, k, v = (jax.random.normal(jax.random.PRNGKey(i), (2, 4, 16, 8), jnp.bfloat16) for i in range(3))  # B N T H
    mask = jax.random.uniform(jax.random.PRNGKey(3), (2, 1, 16, 16)) > 0.3
    mask = mask.at[:, :, :, 0].set(True).at[1, :, 5].set(False)  # batch 1's query 5 sees nothing
    if causal:
        mask = mask.at[0, :, 7, :8].set(False)  # and batch 0's query 7 nothing before it
    with _attention._cudnn_checks_from_torch():
        out, lse = _attention._cudnn_attention_with_boolean_mask(q, k, v, mask, causal, 0.25)
    assert cudnn_kernels_run_by_xla == [("forward", (True, False))]
    nothing = [(1, 5)] + ([(0, 7)] if causal else [])
    for batch, query in nothing:
        assert (out[batch, :, query] == 0).all() and (lse[batch, :, query] == -jnp.inf).all()
    seen = mask & jnp.tril(jnp.ones((16, 16), jnp.bool_)) if causal else mask
    expected = jnp.swapaxes(jax.nn.dot_product_attention(*(jnp.swapaxes(x, 1, 2) for x in (q, k, v)), mask=seen,
                                                         scale=0.25), 1, 2)
    for batch, query in nothing:
        expected = expected.at[batch, :, query].set(0)
    assert jnp.allclose(out.astype(jnp.float32), expected.astype(jnp.float32), atol=1e-2)
    assert jnp.isfinite(lse).sum() == lse.size - len(nothing) * lse.shape[1]


@pytest.mark.parametrize("mask", ["causal", "additive", "boolean, a query masked"])
def test_cudnn_backward_reads_the_forwards_output_and_log_sum_exps(monkeypatch, cudnn_kernels_run_by_xla, mask):
    # As PyTorch's fused kernels: the backward does not run the forward again. Its gradients match attention's
    # (grouped queries; a query that sees no key has none), and the log-sum-exps handed over are cuDNN's float32.
    import jax
    import jax.numpy as jnp

    monkeypatch.setenv("CUXLA_ATTENTION", "cudnn")
    q = jax.random.normal(jax.random.PRNGKey(0), (2, 4, 16, 8), jnp.float32)
    k, v = (jax.random.normal(jax.random.PRNGKey(i), (2, 2, 16, 8), jnp.float32) for i in (1, 2))
    grad = jax.random.normal(jax.random.PRNGKey(3), (2, 4, 16, 8), jnp.float32)
    causal, bias, keep = mask == "causal", None, jnp.ones((2, 1, 16, 16), jnp.bool_)
    if mask == "additive":
        bias = jax.random.normal(jax.random.PRNGKey(4), (2, 1, 16, 16), jnp.bfloat16).astype(jnp.float32)
    elif mask.startswith("boolean"):
        keep = (jax.random.uniform(jax.random.PRNGKey(4), (2, 1, 16, 16)) > 0.3).at[..., 0].set(True)
        keep = keep.at[1, :, 5].set(False)
        bias = keep
    if causal:
        keep = keep & jnp.tril(jnp.ones((16, 16), jnp.bool_))

    def reference(q, k, v):  # float32, (B, N, T, H); a query that sees no key gives 0
        k, v = (jnp.repeat(x, 2, axis=1) for x in (k, v))
        s = jnp.einsum("bnth,bnsh->bnts", q, k) * 0.25 + (bias if mask == "additive" else 0.0)
        s = jnp.where(keep, s, -jnp.inf)
        weights = jnp.nan_to_num(jnp.exp(s - jax.nn.logsumexp(s, axis=-1, keepdims=True)))
        return jnp.einsum("bnts,bnsh->bnth", weights, v), jax.nn.logsumexp(s, axis=-1)

    bf16 = [x.astype(jnp.bfloat16) for x in (q, k, v, grad)]
    mask_in = bias.astype(jnp.bfloat16) if mask == "additive" else bias
    with _attention.lowering_for_cuda():
        out, lse = _attention._jax_attention(*bf16[:3], mask_in, causal, 0.25)
        assert cudnn_kernels_run_by_xla == [("forward", (mask != "causal", False))]
        grads = _attention._jax_attention_backward(bf16[3], *bf16[:3], mask_in, causal, 0.25, out=out, lse=lse)
    assert cudnn_kernels_run_by_xla[1:] == [("backward", (mask != "causal", False))], "the forward ran again"
    expected_out, expected_lse = reference(*(x.astype(jnp.bfloat16).astype(jnp.float32) for x in (q, k, v)))
    assert lse.dtype == jnp.float32
    seen = jnp.isfinite(expected_lse)
    assert jnp.allclose(jnp.where(seen, lse, 0), jnp.where(seen, expected_lse, 0), atol=1e-4)
    assert jnp.allclose(out.astype(jnp.float32), expected_out, atol=2e-2)
    _, vjp = jax.vjp(lambda *x: reference(*x)[0], *(x.astype(jnp.bfloat16).astype(jnp.float32) for x in (q, k, v)))
    for got, want in zip(grads[:3], vjp(bf16[3].astype(jnp.float32))):
        assert jnp.allclose(got.astype(jnp.float32), want, atol=5e-2, rtol=5e-2), float(jnp.abs(got - want).max())
    assert jnp.isfinite(jnp.stack([jnp.abs(g.astype(jnp.float32)).max() for g in grads[:3]])).all()


def test_the_forward_keeps_what_its_backward_reads(monkeypatch):
    # cuDNN's backward (16-bit types) reads the forward's output and log-sum-exps, XLA's own in float32 its
    # log-sum-exps alone; with dropout or a mask's gradient the backward differentiates the forward run
    # again: a kept result would be memory for nothing.
    from torch._subclasses.fake_tensor import FakeTensorMode

    monkeypatch.delenv("CUXLA_ATTENTION", raising=False)
    with FakeTensorMode():  # CUDA tensors without a GPU
        cuda = torch.empty(2, 4, 128, 8, device="cuda", dtype=torch.bfloat16)
        cases = {"cuda bfloat16": (cuda, 0.0, False), "with dropout": (cuda, 0.1, False),
                 "a mask gradient": (cuda, 0.0, True), "cuda float32": (cuda.float(), 0.0, False),
                 "cpu bfloat16": (torch.empty(2, 4, 128, 8, dtype=torch.bfloat16), 0.0, False),
                 "cpu float32": (torch.empty(2, 4, 128, 8), 0.0, False),
                 "cpu float32 with dropout": (torch.empty(2, 4, 128, 8), 0.1, False)}
    both, lse, none = (True, True), (False, True), (False, False)
    expected = {"cudnn": [both, none, none, lse, none, lse, none],
                "xla": [none, none, none, lse, none, lse, none]}
    for setting, reads in expected.items():
        monkeypatch.setenv("CUXLA_ATTENTION", setting)
        assert [_attention._forward_results_read(*args) for args in cases.values()] == reads, setting


def test_an_additive_mask_is_xlas_own_where_jax_cannot_take_it_without_its_gradient(monkeypatch,
                                                                                     a_hopper_gpu_with_cudnn):
    import jax.numpy as jnp
    from jax._src.cudnn import fused_attention_stablehlo

    monkeypatch.setenv("CUXLA_ATTENTION", "cudnn")
    monkeypatch.delattr(fused_attention_stablehlo, "combine_bias_and_mask")  # JAX's own cuDNN path needs it too
    assert "__cudnn$fmha" not in _lowered_for_cuda(jnp.bfloat16, causal=False, additive=True)


def test_cudnn_attention_needs_compute_capability_8(monkeypatch, a_hopper_gpu_with_cudnn):
    import jax.numpy as jnp

    monkeypatch.setenv("CUXLA_ATTENTION", "cudnn")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert "__cudnn$fmha" not in _lowered_for_cuda(jnp.bfloat16)


def test_cudnn_attention_is_not_taken_where_jax_has_other_checks(monkeypatch, a_hopper_gpu_with_cudnn):
    # A JAX whose checks cuxla does not know would ask its own GPU client: XLA's own attention instead.
    import jax.numpy as jnp
    from jax._src.cudnn import fused_attention_stablehlo

    monkeypatch.setenv("CUXLA_ATTENTION", "cudnn")
    monkeypatch.delattr(fused_attention_stablehlo, "is_cuda_compute_capability_equal")
    assert "__cudnn$fmha" not in _lowered_for_cuda(jnp.bfloat16)


def test_cudnn_attention_is_never_lowered_for_the_cpu(monkeypatch, a_hopper_gpu_with_cudnn):
    monkeypatch.setenv("CUXLA_ATTENTION", "cudnn")
    assert _attention.implementation("cpu") == "xla" and _attention.implementation("cuda") == "cudnn"


def test_an_unknown_attention_setting_is_a_value_error(monkeypatch):
    monkeypatch.setenv("CUXLA_ATTENTION", "flash")
    with pytest.raises(ValueError, match=r"CUXLA_ATTENTION='flash' is not one of xla, cudnn"):
        _attention.implementation("cuda")


@pytest.mark.parametrize("mask", ["causal", "additive causal", "boolean causal, a query masked"])
def test_compiled_bfloat16_attention_through_cudnn_matches_pytorch(monkeypatch, client, mask):
    # "additive causal": the causal mask as transformers makes it on CUDA, the dtype's lowest number where masked;
    # "boolean causal": as transformers 5 makes it, here with a query that may see no key.
    if client.platform != "cuda":
        pytest.skip("cuDNN's attention runs on a CUDA GPU")
    monkeypatch.setenv("CUXLA_ATTENTION", "cudnn")
    taken = []
    cudnn_attention = _attention._cudnn_attention
    monkeypatch.setattr(_attention, "_cudnn_attention",
                        lambda *args: taken.append(cudnn_attention(*args)) or taken[-1])
    torch.manual_seed(0)
    q = torch.randn(2, 8, 128, 64, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(2, 2, 128, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    bias = None
    if mask == "additive causal":
        allowed = torch.ones(128, 128, dtype=torch.bool, device="cuda").tril()
        bias = torch.zeros(2, 1, 128, 128, device="cuda", dtype=torch.bfloat16).masked_fill(
            ~allowed, torch.finfo(torch.bfloat16).min)
    expected, expected_grads = _reference(q.float(), k.float(), v.float(), None, True)
    if mask.startswith("boolean"):
        bias = torch.ones(2, 1, 128, 128, dtype=torch.bool, device="cuda").tril()
        bias[1, :, 9] = False
        expected, expected_grads = _reference(q.float(), k.float(), v.float(), bias, False)

    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=bias is None, enable_gqa=True)

    torch._dynamo.reset()
    cuxla.dynamo.reset_report()
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = torch.compile(attention, backend="cuxla")(q, k, v)
    grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    assert taken and all(t is not None for t in taken), "cuDNN's path was not lowered"
    torch.testing.assert_close(out.float(), expected, rtol=2e-2, atol=2e-2)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got.float(), want, rtol=5e-2, atol=5e-2)
    report = cuxla.dynamo.report()
    assert report["xla_programs"] == report["graphs"] == 2 and report["xla_ops"] == report["aten_ops"], report


@pytest.mark.parametrize("case", ["causal", "boolean mask, a query seeing no key", "additive mask", "grouped queries"])
def test_xlas_own_backward_from_the_saved_forward_matches_its_derivative(case):
    # The weights made from the saved log-sum-exps, each row's sum from dout . out: the gradients of
    # differentiating the forward again, and no softmax (no maximum) in the backward's program.
    import jax
    import numpy

    generator = numpy.random.default_rng(0)
    heads, key_heads = (8, 2) if case == "grouped queries" else (4, 4)
    q, g = (generator.standard_normal((2, heads, 16, 8), numpy.float32) for _ in range(2))
    k, v = (generator.standard_normal((2, key_heads, 16, 8), numpy.float32) for _ in range(2))
    mask, causal = None, case in ("causal", "grouped queries")
    if case.startswith("boolean"):
        mask = generator.random((2, 1, 16, 16)) > 0.4
        mask[0, 0, 3] = False
    elif case == "additive mask":
        mask = generator.standard_normal((16, 16), numpy.float32)

    def backward(q, k, v, g, saved):
        out, lse = _attention._jax_attention(q, k, v, mask, causal, 0.3)
        given = {"out": out, "lse": lse} if saved else {}
        return _attention._jax_attention_backward(g, q, k, v, mask, causal, 0.3, **given)[:3]

    with jax.default_device(jax.devices("cpu")[0]), jax.default_matmul_precision("highest"):
        from_saved = jax.jit(lambda *a: backward(*a, True))(q, k, v, g)
        again = jax.jit(lambda *a: backward(*a, False))(q, k, v, g)
        for got, want in zip(from_saved, again):
            numpy.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        out, lse = jax.jit(lambda q, k, v: _attention._jax_attention(q, k, v, mask, causal, 0.3))(q, k, v)

        def backward_alone(q, k, v, g, out, lse):
            return _attention._jax_attention_backward(g, q, k, v, mask, causal, 0.3, out=out, lse=lse)[:3]

        def backward_again(q, k, v, g):
            return _attention._jax_attention_backward(g, q, k, v, mask, causal, 0.3)[:3]

        # A softmax takes each row's maximum; the backward from the saved forward takes none.
        assert "stablehlo.maximum" not in jax.jit(backward_alone).lower(q, k, v, g, out, lse).as_text()
        assert "stablehlo.maximum" in jax.jit(backward_again).lower(q, k, v, g).as_text()


@pytest.mark.parametrize("case", ["2 blocks", "3 uneven blocks, grouped queries"])
def test_long_causal_attention_in_query_blocks_is_jax_nns_attention(case):
    # Each block of queries against the keys up to its last query: jax.nn's output, log-sum-exps and
    # gradients, and no score of a query against a key past its block's end computed.
    import jax
    import jax.numpy as jnp
    import numpy

    length, heads, key_heads = (512, 4, 4) if case == "2 blocks" else (1000, 4, 2)
    generator = numpy.random.default_rng(0)
    q, g = (generator.standard_normal((1, heads, length, 16), numpy.float32) for _ in range(2))
    k, v = (generator.standard_normal((1, key_heads, length, 16), numpy.float32) for _ in range(2))
    blocks = _attention._query_blocks(q, k, None, True)
    assert blocks == ([(0, 256, 256), (256, 512, 512)] if length == 512 else
                      [(0, 334, 334), (334, 668, 668), (668, 1000, 1000)])

    def jax_nns(q, k, v):
        k, v = (jnp.repeat(x, heads // key_heads, axis=1) for x in (k, v))
        out, lse = jax.nn.dot_product_attention(*map(_attention._sequence_second, (q, k, v)), scale=0.3,
                                                is_causal=True, return_residual=True)
        return _attention._sequence_second(out), _attention._sequence_second(lse)

    def in_blocks(q, k, v, g):
        out, lse = _attention._jax_attention(q, k, v, None, True, 0.3)
        return out, lse, _attention._jax_attention_backward(g, q, k, v, None, True, 0.3, out=out, lse=lse)[:3]

    with jax.default_device(jax.devices("cpu")[0]), jax.default_matmul_precision("highest"):
        out, lse, grads = jax.jit(in_blocks)(q, k, v, g)
        (want_out, want_lse), vjp = jax.vjp(jax_nns, q, k, v)
        numpy.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-5)
        numpy.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
        for got, want in zip(grads, vjp((g, jnp.zeros_like(want_lse)))):
            numpy.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        program = jax.jit(in_blocks).lower(q, k, v, g).as_text()
    assert f"x{length}x{length}xf32" not in program and f"x{blocks[0][1]}x{blocks[0][2]}xf32" in program


def test_causal_attention_shorter_than_two_blocks_or_masked_is_one_block():
    import numpy

    short, long = (numpy.zeros((1, 2, length, 8), numpy.float32) for length in (511, 1024))
    mask = numpy.ones((1024, 1024), bool)
    assert _attention._query_blocks(short, short, None, True) == [(0, 511, 511)]
    assert _attention._query_blocks(long, long, None, False) == [(0, 1024, 1024)]
    assert _attention._query_blocks(long, long, mask, True) == [(0, 1024, 1024)]
    assert _attention._query_blocks(long.astype(numpy.float16), long.astype(numpy.float16), None, True) == \
        [(0, 1024, 1024)]
    assert len(_attention._query_blocks(numpy.zeros((1, 2, 4096, 8), numpy.float32), numpy.zeros(
        (1, 2, 4096, 8), numpy.float32), None, True)) == _attention._CAUSAL_BLOCKS_MAX


def test_compiled_long_causal_attention_in_query_blocks_matches_pytorch(monkeypatch, client):
    device = "cuda" if client.platform == "cuda" else "cpu"
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 512, 16, device=device) for _ in range(3))
    expected, expected_grads = _reference(q, k, v, None, True)
    taken = []
    blocked = _attention._xla_attention_in_blocks
    monkeypatch.setattr(_attention, "_xla_attention_in_blocks", lambda *a: taken.append(a[-1]) or blocked(*a))

    torch._dynamo.reset()
    cuxla.dynamo.reset_report()
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                        backend="cuxla")(q, k, v)
    grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    assert taken == [[(0, 256, 256), (256, 512, 512)]]
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    report = cuxla.dynamo.report()
    assert report["xla_programs"] == report["graphs"] == 2 and report["xla_ops"] == report["aten_ops"], report
