"""Data-parallel training of a PyTorch model as one SPMD XLA program.

`DataParallel` traces a model's loss to a core-ATen graph (make_fx), lowers
it with torchax into JAX, takes its gradient there, and lowers one SGD step
— parameters replicated, the batch split along its first dimension over the
mesh's first axis — to StableHLO for a mesh of that many partitions (JAX's
abstract mesh: no JAX devices are involved). cuxla compiles it for the
mesh's devices; XLA partitions it and inserts the collectives (the
gradients' all-reduce: NCCL on GPUs). The batch's shards
are imported onto the devices (zero-copy where they already are), the
parameters stay on the devices as replicated ShardedArrays between steps,
and `parameters()` / `named_parameters()` hand them back to PyTorch zero-copy. Buffers (BatchNorm's
running statistics, position ids) are read, never updated.
"""
from __future__ import annotations

from typing import Callable, Iterator, Sequence

import torch
from torch._decomp import core_aten_decompositions
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.fx.experimental.proxy_tensor import make_fx

from . import _client, _cuxla, _torchax
from . import torch as cuxla_torch


class DataParallel:
    """``loss(model, batch)`` minimised by SGD over ``mesh`` (its first axis
    splits the batch; the other axes replicate), step by step."""

    def __init__(self, model: torch.nn.Module, loss: Callable, mesh: _cuxla.Mesh, *, lr: float,
                 example_batch: Sequence[torch.Tensor], client: _cuxla.Client | None = None):
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        self.mesh = mesh
        self.names = [name for name, _ in model.named_parameters()]
        params = [p.detach() for _, p in model.named_parameters()]
        buffer_names = [name for name, _ in model.named_buffers()]
        buffers = [b.detach() for _, b in model.named_buffers()]
        env = _torchax.environment()

        def torch_loss(params, buffers, batch):
            named = {**dict(zip(self.names, params)), **dict(zip(buffer_names, buffers))}
            return loss(lambda *a, **k: torch.func.functional_call(model, named, a, k), batch)

        # The loss as a core ATen graph first (as AOTAutograd hands graphs to
        # the torch.compile backend): torchax lowers ATen ops, not every
        # Python-level use of a tensor.
        # Attention in plain ops: the fused SDPA kernels PyTorch picks on
        # CUDA have no torchax lowering.
        with sdpa_kernel(SDPBackend.MATH):
            graph = make_fx(torch_loss, decomposition_table=core_aten_decompositions())(
                params, buffers, list(example_batch))
        _torchax.drop_device_moves(graph)

        def loss_of(jax_params, jax_buffers, jax_batch):
            with env:
                value = graph(*env.j2t_iso((list(jax_params), list(jax_buffers), list(jax_batch))))
            return env.t2j_iso(value)

        def step(jax_params, jax_buffers, jax_batch):
            value, grads = jax.value_and_grad(loss_of)(jax_params, jax_buffers, jax_batch)
            return value, [p - lr * g for p, g in zip(jax_params, grads)]

        abstract = _torchax.abstract_mesh(tuple(mesh.shape), tuple(mesh.axis_names))
        replicated = NamedSharding(abstract, PartitionSpec())
        split = NamedSharding(abstract, PartitionSpec(mesh.axis_names[0]))

        def spec(t: torch.Tensor):
            return jax.ShapeDtypeStruct(tuple(t.shape), _torchax.jax_dtype(t.dtype))

        with _torchax.lowering_context(mesh.devices[0].platform, abstract):
            lowered = jax.jit(step, in_shardings=([replicated] * len(params), [replicated] * len(buffers),
                                                  [split] * len(example_batch)),
                              out_shardings=(replicated, [replicated] * len(params))).trace(
                [spec(p) for p in params], [spec(b) for b in buffers], [spec(b) for b in example_batch]).lower(
                lowering_platforms=(mesh.devices[0].platform,))
        self.program = lowered.as_text()
        self.executable = _client.compile(self.program, client=client, mesh=mesh)
        partitions = self._partitions = len(mesh.devices)
        self._params = [_client.shard([p] * partitions, mesh, [None] * p.ndim) for p in params]
        # Buffers (BatchNorm statistics, position ids...) are read, not trained.
        self._buffers = [_client.shard([b] * partitions, mesh, [None] * b.ndim) for b in buffers]

    def step(self, batch: Sequence[torch.Tensor]) -> torch.Tensor:
        """One SGD step on ``batch`` (the global batch, split along dimension
        0 into one shard per partition); the loss before the step, as a
        PyTorch tensor on the first device."""
        splits, partitions = self.mesh.shape[0], self._partitions
        sharded = []
        for t in batch:
            if t.shape[0] % splits:
                raise ValueError(f"a batch of {t.shape[0]} does not split evenly over {splits} partitions")
            # Device p (row-major in the mesh) holds chunk p // (devices per chunk).
            chunks = t.chunk(splits)
            parts = [chunks[p * splits // partitions] for p in range(partitions)]
            sharded.append(_client.shard(parts, self.mesh, [self.mesh.axis_names[0]] + [None] * (t.ndim - 1)))
        loss, *params = self.executable.call_sharded(self._params + self._buffers + sharded)
        self._params = params
        return cuxla_torch.to_torch(loss.shards[0])

    def named_parameters(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The current parameters with the model's names for them, as PyTorch
        tensors of the first device's replica (zero-copy)."""
        for name, p in zip(self.names, self._params):
            yield name, cuxla_torch.to_torch(p.shards[0])

    def parameters(self) -> Iterator[torch.Tensor]:
        """The current parameters, in the model's order, as ``named_parameters`` has them."""
        for _, tensor in self.named_parameters():
            yield tensor
