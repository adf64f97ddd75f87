"""PyTorch tensors <-> cuxla Arrays, zero-copy, and XLA programs on PyTorch tensors.

Handoffs go through PyTorch's DLPack C exchange API (PyTorch >= 2.10) when it
has one, else through `__dlpack__`. On CUDA, XLA waits on the device for
PyTorch's current stream and PyTorch's current stream for XLA: no host sync.
`use_xla_allocator` and `xla_allocator` put PyTorch's CUDA allocations in
the memory pool XLA allocates from (`_torch_memory`).
"""
from __future__ import annotations

import atexit

import torch

from . import _cuxla, _torch_memory
from ._torch_memory import (memory_pool_stats, reset_memory_pool_peaks, use_xla_allocator,  # noqa: F401
                            uses_xla_allocator, xla_allocator)

_HAS_EXCHANGE_API = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")


def to_xla(tensor: torch.Tensor, *, copy: bool | None = None) -> _cuxla.Array:
    """`tensor` as a cuxla Array on its own device: a view when XLA can use
    the memory as it is, else (copy=None) one compact device copy."""
    return _cuxla.from_dlpack(tensor, copy=copy)


def to_torch(array: _cuxla.Array) -> torch.Tensor:
    """A PyTorch tensor of `array`'s memory (no copy); it stays valid after
    the Array is deleted."""
    if _HAS_EXCHANGE_API:
        return _cuxla.export_to(array, torch.Tensor)
    return torch.from_dlpack(array)


def call(executable: _cuxla.Executable, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Runs `executable` on PyTorch tensors and returns PyTorch tensors,
    zero-copy both ways. The XLA view of a tensor given again is kept while
    the tensor lives and its memory, shape and strides stay the same, so
    calls on the same tensors (a model's weights) make no new views. XLA out
    of memory on a GPU is a MemoryError naming PyTorch's and XLA's usage."""
    try:
        if _HAS_EXCHANGE_API:
            return _cuxla.call_with(executable, torch.Tensor, *tensors)
        return tuple(torch.from_dlpack(out) for out in executable(*tensors))
    except MemoryError as error:
        if executable.device.platform != "cuda":
            raise
        # XLA's message tells its own allocation; PyTorch's share of the card is the other half of the story.
        try:
            usage = _torch_memory.usage_in_words(executable.device)
        except Exception:  # the usage is extra: XLA's error stands without it
            raise error from None
        raise MemoryError(f"{error}; {usage}") from None


# The kept views go while Python still runs, their tensors' deleters with them.
atexit.register(_cuxla.forget_call_views)


def distributed_client(**options) -> _cuxla.Client:
    """One CUDA client of all the processes of torch.distributed's default
    group (initialised by the caller; one process per GPU): node ``rank`` of
    ``world_size``, finding the others through the group's store (keys under
    "cuxla/"). ``options`` are Client's memory options."""
    import torch.distributed as dist

    if not dist.is_initialized():
        raise RuntimeError("torch.distributed is not initialised: call init_process_group first")
    store = dist.PrefixStore("cuxla", dist.distributed_c10d._get_default_store())
    return _cuxla.Client("cuda", node_id=dist.get_rank(), num_nodes=dist.get_world_size(), kv_store=store, **options)

