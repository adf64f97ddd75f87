"""The JAX lowerings cuxla adds to torchax's: ops it lacks (convolution's and pooling's
backwards, the fused attention pair, torch's and transformers' grouped matrix
products of mixture-of-experts layers), ops whose lowering gives other numbers than
PyTorch (max-pool's backward, reductions asked for in a dtype, norms in half
precision), ops whose lowering costs XLA a buffer it need not write or a
pass it need not make (the negative log-likelihood's backward, layer norm's
backward) and ops whose lowering on the CPU is a call the CPU plugin
refuses (the triangular solve) or that XLA's CPU runs slowly (the
depthwise convolution, the ragged products of experts). Each takes and
returns JAX arrays."""
from __future__ import annotations

import functools

import torch

from . import _attention

aten = torch.ops.aten


def _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """torchax's convolution, except a depthwise one on the CPU (each output
    channel reads one input channel: Mamba's and the gated delta rule's
    causal convolutions, ConvNeXt's, MobileNet's), there a sum of the
    kernel's taps: XLA's CPU runs a convolution with feature groups slowly
    and expands the derivative's weight gradient (batch groups) into a dense
    convolution over every pair of channels (8192 channels, kernel 4, two
    cores: 15 ms forward, 840 ms with the backward, 0.35 ms and 1.5 ms as taps)."""
    from torchax.ops import jaten

    spatial = weight.ndim - 2
    depthwise = not transposed and groups > 1 and weight.shape[1] == 1 and input.shape[-spatial - 1] == groups
    if not depthwise or _lowering_platform() != "cpu":
        return jaten._aten_convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                                       groups)
    return _depthwise_convolution_taps(input, weight, bias,
                                       *(_per_dimension(v, spatial) for v in (stride, padding, dilation)))


def _per_dimension(values, spatial: int) -> list[int]:
    """A convolution's stride, padding or dilation, one per spatial dimension
    (PyTorch's single value stands for all)."""
    return list(values) * spatial if len(values) == 1 else list(values)


def _depthwise_convolution_taps(input, weight, bias, stride, padding, dilation):
    """A depthwise convolution as the sum, over the kernel's taps, of the
    input's window at each tap times the tap's weight per channel (an
    output channel o reads input channel o // multiplier), plus the bias
    (None: none), computed as PyTorch's kernels do in float32 for half
    precision and rounded once."""
    import itertools

    import jax
    import jax.numpy as jnp

    spatial = weight.ndim - 2
    kernel = weight.shape[2:]
    dtype = _computation_dtype(input.dtype)
    leading = input.ndim - spatial
    x = jnp.pad(input.astype(dtype), [(0, 0)] * leading + [(p, p) for p in padding])
    x = jnp.repeat(x, weight.shape[0] // input.shape[leading - 1], axis=leading - 1)
    outputs = [(x.shape[leading + d] - dilation[d] * (kernel[d] - 1) - 1) // stride[d] + 1 for d in range(spatial)]
    total = None
    for tap in itertools.product(*map(range, kernel)):
        start = [0] * leading + [t * step for t, step in zip(tap, dilation)]
        limit = [*x.shape[:leading],
                 *(first + (n - 1) * st + 1 for first, n, st in zip(start[leading:], outputs, stride))]
        window = jax.lax.slice(x, start, limit, [1] * leading + list(stride))
        term = window * weight[(slice(None), 0, *tap)].astype(dtype).reshape(-1, *(1,) * spatial)
        total = term if total is None else total + term
    if bias is not None:
        total = total + bias.astype(dtype).reshape(-1, *(1,) * spatial)
    return total.astype(input.dtype)


def _convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                          output_padding, groups, output_mask):
    """The derivative of cuxla's own convolution, so that forward and
    backward agree on every stride, padding, dilation and group."""
    import jax

    def convolution(x, w):
        return _convolution(x, w, None, stride, padding, dilation, transposed, output_padding, groups)

    _, vjp = jax.vjp(convolution, input, weight)
    grad_input, grad_weight = vjp(grad_output)
    grad_bias = grad_output.sum(axis=[d for d in range(grad_output.ndim) if d != 1]) if output_mask[2] else None
    return (grad_input if output_mask[0] else None, grad_weight if output_mask[1] else None, grad_bias)


def _avg_pool_backward(grad_output, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override):
    """The derivative of torchax's average pooling (2-D and 3-D), so that
    forward and backward agree on every padding, ceiling and divisor."""
    import jax
    from torchax.ops import jaten

    def pool(x):
        return jaten._aten_avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)

    return jax.vjp(pool, input)[1](grad_output)[0]


def _adaptive_avg_pool_backward(spatial: int):
    """The derivative of torchax's adaptive average pooling over `spatial`
    dimensions (2 or 3; batched or not), to the output size the gradient has."""

    def lowering(grad_output, input):
        import jax
        from torchax.ops import jaten

        def pool(x):
            return jaten.adaptive_avg_pool2or3d(x, grad_output.shape[-spatial:])

        return jax.vjp(pool, input)[1](grad_output)[0]

    return lowering


def _max_pool2d_backward(grad_output, input, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """Each output's gradient added to the input position it took its maximum
    from (`indices`: flat positions within each channel's plane), as PyTorch does."""
    import jax.numpy as jnp

    planes = grad_output.shape[:-2]
    flat_grad = grad_output.reshape(-1, grad_output.shape[-2] * grad_output.shape[-1])
    flat_indices = indices.reshape(flat_grad.shape)
    rows = jnp.arange(flat_grad.shape[0])[:, None]
    plane = input.shape[-2] * input.shape[-1]
    grad_input = jnp.zeros((flat_grad.shape[0], plane), grad_output.dtype).at[rows, flat_indices].add(flat_grad)
    return grad_input.reshape(*planes, *input.shape[-2:])


def _computation_dtype(dtype):
    """The dtype PyTorch's kernels compute in for inputs of `dtype` (a JAX
    dtype): float32 for half precision, else `dtype` itself."""
    import jax.numpy as jnp

    return jnp.dtype(jnp.float32) if dtype in (jnp.bfloat16, jnp.float16) else dtype


def _in_dtype(torchax_lowering: str):
    """torchax's lowering of a reduction, its input cast first to the dtype
    asked for, in which PyTorch computes. torchax's sum computes in the
    input's own dtype (a bfloat16 sum rounded to bfloat16, then widened),
    its vector norm casts only its result, its mean takes no dtype at all."""
    def lowering(input, *args, dtype=None, **kwargs):
        from torchax.ops import jaten, mappings

        if dtype is not None:
            input = input.astype(mappings.t2j_dtype(dtype))
        return getattr(jaten, torchax_lowering)(input, *args, **kwargs)

    lowering.__qualname__ = f"{torchax_lowering}_in_dtype"  # what a cached lowering is keyed by
    return lowering


def _in_float32(torchax_lowering: str):
    """torchax's lowering computed as PyTorch's kernels compute for a
    half-precision input: the arrays of the input's dtype widened to float32,
    the results rounded back to it once at the end. torchax's computes in the
    input's own dtype, rounding at each step (a layer norm's output a few
    units in the last place off eager's; a float16 norm's powers overflow)."""
    def lowering(input, *args, **kwargs):
        import jax
        from torchax.ops import jaten

        run, computation = getattr(jaten, torchax_lowering), _computation_dtype(input.dtype)
        if computation == input.dtype:
            return run(input, *args, **kwargs)

        def widened(a):
            return a.astype(computation) if isinstance(a, jax.Array) and a.dtype == input.dtype else a

        results = run(widened(input), *map(widened, args), **{k: widened(v) for k, v in kwargs.items()})
        return jax.tree.map(lambda r: r.astype(input.dtype) if isinstance(r, jax.Array) and r.dtype == computation
                            else r, results)

    lowering.__qualname__ = f"{torchax_lowering}_in_float32"  # what a cached lowering is keyed by
    return lowering


def _vector_norm(input, *args, dtype=None, **kwargs):
    """Vector norm as PyTorch computes it: in `dtype` where one is given,
    else in float32 for half-precision input, rounded once."""
    if dtype is None:
        return _norm_in_float32(input, *args, **kwargs)
    return _norm_in_dtype(input, *args, dtype=dtype, **kwargs)


_norm_in_dtype, _norm_in_float32 = _in_dtype("_aten_linalg_vector_norm"), _in_float32("_aten_linalg_vector_norm")


def _nll_loss_backward(grad_output, input, target, weight, reduction, ignore_index, total_weight):
    """PyTorch's derivative of nll_loss, as a select of each target's class
    (a one-hot) that XLA fuses into the ops reading it. PyTorch's
    decomposition scatters into zeros: a kernel of its own writing a buffer of
    the input's size (a language model's logits, in float32), all of it held
    with the backward's other scratch."""
    import jax.numpy as jnp

    channel = 0 if input.ndim < 2 else 1
    grad = grad_output / total_weight if reduction == 1 else grad_output  # 1: mean
    if input.ndim == 1 and target.ndim > 0:  # no batch: PyTorch reads the first target alone
        target = target[0]
    target = jnp.expand_dims(target, channel)
    classes = jnp.arange(input.shape[channel], dtype=target.dtype)
    if channel == 1:
        classes = classes[None, :]
    taken = (classes == target) & (target != ignore_index)
    if input.ndim > grad.ndim > 0:  # reduction none: one gradient per row
        grad = jnp.expand_dims(grad, channel)
    scale = -grad
    if weight is not None:
        scale = scale * (weight[None, :] if channel == 1 else weight)
    return jnp.where(taken, scale, jnp.zeros((), scale.dtype)).astype(input.dtype)


def _native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    """PyTorch's derivative of layer norm (its decomposition's arithmetic, in
    float32 for half-precision inputs), with the weight's and the bias's
    gradients summed over the rows in one reduction of two operands. Written
    as two sums, XLA on a GPU fuses the bias's with the product the weight's
    sums and writes that product out, an activation-sized buffer read again
    by a reduction of its own: two passes over the rows where one does."""
    import math

    import jax
    import jax.numpy as jnp

    inner = tuple(range(input.ndim - len(normalized_shape), input.ndim))
    outer = tuple(range(input.ndim - len(normalized_shape)))
    computation = _computation_dtype(input.dtype)
    x, grad, mean, rstd = (a.astype(computation) for a in (input, grad_out, mean, rstd))
    x_hat = (x - mean) * rstd
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        grad_x_hat = grad * weight.astype(computation) if weight is not None else grad
        n = math.prod(normalized_shape)
        sum_grad = jnp.sum(grad_x_hat, axis=inner, keepdims=True)
        sum_grad_x_hat = jnp.sum(grad_x_hat * x_hat, axis=inner, keepdims=True)
        grad_input = ((rstd / n) * (n * grad_x_hat - sum_grad - x_hat * sum_grad_x_hat)).astype(input.dtype)
    wants_weight = output_mask[1] and weight is not None
    wants_bias = output_mask[2] and bias is not None
    if wants_weight and wants_bias:
        zero = jnp.zeros((), computation)
        grad_weight, grad_bias = jax.lax.reduce(
            (grad * x_hat, grad), (zero, zero), lambda a, b: (a[0] + b[0], a[1] + b[1]), outer)
    elif wants_weight:
        grad_weight = jnp.sum(grad * x_hat, axis=outer)
    elif wants_bias:
        grad_bias = jnp.sum(grad, axis=outer)
    return (grad_input,
            grad_weight.astype(weight.dtype) if grad_weight is not None else None,
            grad_bias.astype(bias.dtype) if grad_bias is not None else None)


def _lowering_platform() -> str | None:
    """The platform a program is lowered for: its default device's, which
    cuxla's lowering sets (`_torchax.lowering_context`)."""
    import jax

    return getattr(getattr(jax.config.jax_default_device, "client", None), "platform", None)


def _solve_triangular(a, b, *, upper, left=True, unitriangular=False):
    """The solution of a triangular system, A's and B's batch dimensions
    broadcast as PyTorch does (torchax's lowering takes a B of A's rank minus
    one, square, for a batch of vectors). XLA's own op where JAX lowers to it
    (CUDA); on the CPU JAX lowers it to a LAPACK call only its own client
    registers, which the CPU plugin refuses: there, substitution one row at
    a time. Either reads only A's triangle, as LAPACK does."""
    import jax
    import jax.numpy as jnp

    if not left:  # X A = B is A^T X^T = B^T
        return _solve_triangular(a.mT, b.mT, upper=not upper, unitriangular=unitriangular).mT
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a, b = jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(b, batch + b.shape[-2:])
    if _lowering_platform() != "cpu":
        return jax.lax.linalg.triangular_solve(a, b, left_side=True, lower=not upper, unit_diagonal=unitriangular)
    n = a.shape[-1]
    off_diagonal = jnp.triu(a, 1) if upper else jnp.tril(a, -1)
    diagonal = jnp.diagonal(a, axis1=-2, axis2=-1)

    def solve_row(step, x):  # rows not yet solved are zeros: the row's product sums the solved ones
        i = n - 1 - step if upper else step
        row = jax.lax.dynamic_index_in_dim(off_diagonal, i, axis=-2, keepdims=False)
        rest = jax.lax.dynamic_index_in_dim(b, i, axis=-2, keepdims=False) - jnp.einsum("...k,...km->...m", row, x)
        if not unitriangular:
            rest = rest / jax.lax.dynamic_index_in_dim(diagonal, i, axis=-1, keepdims=True)
        return jax.lax.dynamic_update_index_in_dim(x, rest, i, axis=-2)

    return jax.lax.fori_loop(0, n, solve_row, jnp.zeros_like(b))


def _ragged_rows(x, groups, offsets, accumulate):
    """Rows offsets[i-1]:offsets[i] of `x` times matrix i of `groups` (rows
    past the last offset are 0), accumulated in `accumulate`: a ragged
    matrix product. XLA's CPU computes XLA's ragged product densely, every
    row against every group (Qwen3-MoE's 256 rows and 128 experts: 128 times
    the work): there, one tile of rows and one group at a time."""
    import jax
    import jax.numpy as jnp

    if _lowering_platform() == "cpu":
        return _tiled_ragged_rows()(x, groups, _group_sizes(offsets), accumulate)
    product = jax.lax.ragged_dot(x, groups, _group_sizes(offsets), preferred_element_type=accumulate)
    # Zeroed here rather than left to how each platform's XLA treats rows outside every group.
    in_a_group = jnp.arange(x.shape[0]) < offsets[-1]
    return jnp.where(in_a_group[:, None], product, jnp.zeros((), product.dtype))


def _ragged_contraction(a, b, offsets, accumulate):
    """For each group i, columns offsets[i-1]:offsets[i] of `a` times the same
    rows of `b` (a ragged product's weight gradient), accumulated in
    `accumulate`; on the CPU a tile of rows at a time, as `_ragged_rows`."""
    import jax
    import jax.numpy as jnp

    sizes = _group_sizes(offsets)
    if _lowering_platform() == "cpu":  # made as its transpose, as `_tiled_ragged_rows` makes the weights' gradient
        return jnp.swapaxes(_ragged_contraction_in_tiles(b, a.T, sizes, accumulate), 1, 2)
    contraction_in_groups = jax.lax.RaggedDotDimensionNumbers(
        dot_dimension_numbers=(([1], [0]), ([], [])), lhs_ragged_dimensions=[1], rhs_group_dimensions=[])
    return jax.lax.ragged_dot_general(a, b, sizes, contraction_in_groups, preferred_element_type=accumulate)


# Rows a tile holds: from 8 to 32 cost alike on Qwen3-MoE's and larger experts (two CPU cores).
_ROWS_PER_TILE = 16


def _for_each_tile_and_group(sizes, rows: int, step, initial):
    """`initial` through step(carry, first_row, group, in_group) for every
    tile of _ROWS_PER_TILE rows (`rows`, a multiple of it) and every group
    of consecutive rows (of `sizes`) that share a row with it, in row order,
    `in_group` saying which of the tile's rows are the group's; a few steps
    more have no row in a group. Each step moves on to the next group if
    this one ends in the tile, else to the next tile: at most as many steps
    as tiles and groups together."""
    import jax
    import jax.numpy as jnp

    if rows == 0:
        return initial
    tiles, groups = rows // _ROWS_PER_TILE, sizes.shape[0]
    ends = jnp.cumsum(sizes)
    starts = ends - sizes

    def visit(_, state):
        tile, group, carry = state
        current = jnp.minimum(group, groups - 1)
        first_row = tile * _ROWS_PER_TILE
        row = first_row + jnp.arange(_ROWS_PER_TILE)
        in_group = (row >= starts[current]) & (row < ends[current]) & (group < groups)
        carry = step(carry, first_row, current, in_group)
        group_ends_here = ends[current] <= first_row + _ROWS_PER_TILE
        return (jnp.where(group_ends_here, tile, jnp.minimum(tile + 1, tiles - 1)),
                jnp.where(group_ends_here, group + 1, group), carry)

    zero = jnp.zeros((), jnp.int32)
    return jax.lax.fori_loop(0, tiles + groups, visit, (zero, zero, initial))[2]


def _in_whole_tiles(x):
    """`x` with zero rows added up to a whole number of tiles."""
    import jax.numpy as jnp

    return jnp.pad(x, ((0, -x.shape[0] % _ROWS_PER_TILE), (0, 0)))


def _group_rows_of_tile(x, first_row, in_group):
    """The tile of `x` from `first_row`, its rows outside the group zeros."""
    import jax
    import jax.numpy as jnp

    tile = jax.lax.dynamic_slice_in_dim(x, first_row, _ROWS_PER_TILE)
    return jnp.where(in_group[:, None], tile, jnp.zeros((), tile.dtype))


def _ragged_rows_in_tiles(x, groups, sizes, accumulate, transposed: bool = False):
    """`_ragged_rows` of group sizes, a tile of rows times one group's matrix
    (its transpose if `transposed`) a step; rows in no group are 0."""
    import jax
    import jax.numpy as jnp

    padded = _in_whole_tiles(x)
    contracted = 1 if transposed else 0

    def add_product(out, first_row, group, in_group):
        matrix = jax.lax.dynamic_index_in_dim(groups, group, keepdims=False)
        product = jax.lax.dot_general(_group_rows_of_tile(padded, first_row, in_group), matrix,
                                      (((1,), (contracted,)), ((), ())), preferred_element_type=accumulate)
        total = jax.lax.dynamic_slice_in_dim(out, first_row, _ROWS_PER_TILE) + product
        return jax.lax.dynamic_update_slice_in_dim(out, total, first_row, 0)

    out = jnp.zeros((padded.shape[0], groups.shape[2 - contracted]), accumulate)
    return _for_each_tile_and_group(sizes, padded.shape[0], add_product, out)[:x.shape[0]]


def _ragged_contraction_in_tiles(x, y, sizes, accumulate):
    """For each group, its rows of `x` transposed times its rows of `y`: a
    ragged product's weight gradient, a tile of rows a step."""
    import jax
    import jax.numpy as jnp

    x, y = _in_whole_tiles(x), _in_whole_tiles(y)

    def add_product(out, first_row, group, in_group):
        product = jax.lax.dot_general(_group_rows_of_tile(x, first_row, in_group),
                                      jax.lax.dynamic_slice_in_dim(y, first_row, _ROWS_PER_TILE),
                                      (((0,), (0,)), ((), ())), preferred_element_type=accumulate)
        total = jax.lax.dynamic_index_in_dim(out, group, keepdims=False) + product
        return jax.lax.dynamic_update_index_in_dim(out, total, group, 0)

    out = jnp.zeros((sizes.shape[0], x.shape[1], y.shape[1]), accumulate)
    return _for_each_tile_and_group(sizes, x.shape[0], add_product, out)


@functools.cache
def _tiled_ragged_rows():
    """`_ragged_rows_in_tiles` with its derivative in tiles too: the input's
    gradient the same product against the transposed matrices, the
    matrices' a ragged contraction (differentiating the loop instead would
    keep every step's matrix for the backward). The matrices are read, and
    their gradient made, through their transposes: transformers keeps most
    experts' weights as (experts, out, in) and hands their transposes in,
    and two transposes cancel where a loop's operand would be a copy."""
    import jax
    import jax.numpy as jnp

    @functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
    def ragged_rows(x, groups, sizes, accumulate):
        return _ragged_rows_in_tiles(x, jnp.swapaxes(groups, 1, 2), sizes, accumulate, transposed=True)

    def forward(x, groups, sizes, accumulate):
        return ragged_rows(x, groups, sizes, accumulate), (x, groups, sizes)

    def backward(accumulate, saved, grad):
        x, groups, sizes = saved
        grad_x = _ragged_rows_in_tiles(grad, jnp.swapaxes(groups, 1, 2), sizes, accumulate)
        grad_groups = jnp.swapaxes(_ragged_contraction_in_tiles(grad, x, sizes, accumulate), 1, 2)
        return grad_x.astype(x.dtype), grad_groups.astype(groups.dtype), None

    ragged_rows.defvjp(forward, backward)
    return ragged_rows


def _group_sizes(offsets):
    """Each group's size, from where each group ends."""
    import jax.numpy as jnp

    return jnp.diff(offsets, prepend=0).astype(jnp.int32)


def _grouped_mm(input, weight, offsets):
    """transformers' grouped product of experts (its own op, taken where
    torch's is not: float32 under torch.compile): torch's, rows in groups."""
    return _grouped_matrix_product(input, weight, offsets)


def _grouped_mm_backward(input, weight, offsets, grad_output):
    import jax

    _, vjp = jax.vjp(lambda x, w: _grouped_mm(x, w, offsets), input, weight)
    return vjp(grad_output)


def _grouped_matrix_product(self, mat2, offs=None, bias=None, out_dtype=None):
    """torch._grouped_mm (transformers' experts in half precision under
    torch.compile, and its derivatives). With `offs`, a 2-D operand's
    dimension is cut into groups at the offsets: the rows of `self` (each
    group times its matrix of `mat2`), the columns of `mat2` (of `self`), or
    with both 2-D the contraction (a product per group); without, a batched
    product. Accumulated in float32 for half precision, as PyTorch's kernels
    do; what lies past the last offset, which PyTorch leaves unwritten, is 0."""
    import jax.numpy as jnp
    from torchax.ops import mappings

    if bias is not None:
        raise NotImplementedError("torch._grouped_mm with a bias, which PyTorch's own kernels refuse")
    dtype = mappings.t2j_dtype(out_dtype) if out_dtype is not None else self.dtype
    accumulate = _computation_dtype(self.dtype)
    if offs is None:
        product = jnp.matmul(self, mat2, preferred_element_type=accumulate)
    elif mat2.ndim == 3:
        product = _ragged_rows(self, mat2, offs, accumulate)
    elif self.ndim == 3:
        product = _ragged_rows(mat2.T, jnp.swapaxes(self, 1, 2), offs, accumulate).T
    else:
        product = _ragged_contraction(self, mat2, offs, accumulate)
    return product.astype(dtype)


def lowerings() -> dict:
    """ATen op (or custom op) -> its JAX lowering, added to (or replacing)
    torchax's. transformers' ops are there once transformers registered them."""
    table = {
        aten.convolution.default: _convolution,
        aten.convolution_backward.default: _convolution_backward,
        aten.max_pool2d_with_indices_backward.default: _max_pool2d_backward,
        aten.avg_pool2d_backward.default: _avg_pool_backward,
        aten.avg_pool3d_backward.default: _avg_pool_backward,
        aten._adaptive_avg_pool2d_backward.default: _adaptive_avg_pool_backward(2),
        aten._adaptive_avg_pool3d_backward.default: _adaptive_avg_pool_backward(3),
        aten.sum.dim_IntList: _in_dtype("_aten_sum"),
        aten.mean.default: _in_dtype("_aten_mean"),
        aten.mean.dim: _in_dtype("_aten_mean"),
        aten.linalg_vector_norm.default: _vector_norm,
        aten.nll_loss_backward.default: _nll_loss_backward,
        aten.native_layer_norm.default: _in_float32("_aten_native_layer_norm"),
        aten.native_group_norm.default: _in_float32("_aten_native_group_norm"),
        aten.native_layer_norm_backward.default: _native_layer_norm_backward,
        aten.linalg_solve_triangular.default: _solve_triangular,
        aten._grouped_mm.default: _grouped_matrix_product,
        **_attention.LOWERINGS,
    }
    for name, lowering in (("grouped_mm_fallback", _grouped_mm), ("grouped_mm_fallback_backward", _grouped_mm_backward)):
        if hasattr(torch.ops.transformers, name):
            table[getattr(torch.ops.transformers, name).default] = lowering
    return table
