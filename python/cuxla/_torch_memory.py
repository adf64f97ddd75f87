"""One CUDA memory pool for PyTorch and XLA.

PyTorch's allocations are served from each device's default stream-ordered
memory pool, the pool XLA's "cuda_async" allocator draws from: memory either
runtime frees is there for the other's next allocation, and CUDA orders the
reuse after the frees on their streams. The C functions PyTorch loads are in
the extension module (python/bindings/torch_allocator.cc)."""
from __future__ import annotations

import ctypes
import os
from typing import Any

import torch

from . import _cuxla

# XLA's allocator that draws from the devices' default pools.
_XLA_ALLOCATOR = "cuda_async"

_whole_process = False  # use_xla_allocator() swapped PyTorch's allocator
# xla_allocator()'s, made once and never freed: a MemPool keeps only a raw
# pointer to its allocator, which must outlive every pool made with it.
_mem_pool_allocator = None


def uses_xla_allocator() -> bool:
    """Whether `use_xla_allocator()` serves this process's PyTorch allocations."""
    return _whole_process


# PyTorch's memory statistics, also under use_xla_allocator(), which PyTorch
# keeps none of (cuxla's allocator counts PyTorch's bytes instead).

def torch_memory_allocated(device: Any = None) -> int:
    """`torch.cuda.memory_allocated`."""
    if _whole_process:
        return _cuxla.memory_pool_usage(_ordinal(device))["torch_bytes"]
    return torch.cuda.memory_allocated(device)


def torch_max_memory_allocated(device: Any = None) -> int:
    """`torch.cuda.max_memory_allocated`."""
    if _whole_process:
        return _cuxla.memory_pool_usage(_ordinal(device))["torch_peak_bytes"]
    return torch.cuda.max_memory_allocated(device)


def xla_max_memory_allocated() -> int:
    """XLA's peak bytes in use on the CUDA client's device (its allocator's statistics)."""
    from . import _client

    stats = _client.client_for_platform("cuda").memory_stats() or {}
    return stats.get("peak_bytes_in_use") or 0


def reset_torch_peak_memory_stats(device: Any = None) -> None:
    """`torch.cuda.reset_peak_memory_stats` (under use_xla_allocator(), the pool's peaks too)."""
    if _whole_process:
        _cuxla.reset_memory_pool_peaks(_ordinal(device))
    else:
        torch.cuda.reset_peak_memory_stats(device)


def use_xla_allocator() -> None:
    """Every CUDA allocation of PyTorch in this process from the memory pool
    XLA allocates from. Call it before PyTorch's first CUDA allocation (as
    for `torch.cuda.memory.change_current_allocator`). cuxla's CUDA client
    is then made with allocator="cuda_async" (unless CUXLA_ALLOCATOR says
    otherwise, which is an error). `torch.cuda.empty_cache()` gives what the
    pool holds unused back to the device; PyTorch's `torch.cuda.memory_*`
    statistics are not kept by a plugged-in allocator: `memory_pool_stats()`
    has the pool's. Out of memory is a RuntimeError naming both runtimes'
    usage. Where PyTorch itself was started with
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync it draws from the same
    pool already, and only XLA is set to. A second call changes nothing."""
    global _whole_process
    _require_gpu()
    if _whole_process:
        return
    if torch.cuda.memory.get_allocator_backend() == "cudaMallocAsync":
        _xla_on_the_pool()
        return
    if torch.cuda.is_initialized():
        raise RuntimeError("use_xla_allocator() must come before PyTorch's first CUDA allocation: "
                           "PyTorch's CUDA allocator is in use already")
    _xla_on_the_pool()
    allocator = torch.cuda.memory.CUDAPluggableAllocator(_cuxla.__file__, "cuxla_torch_malloc", "cuxla_torch_free")
    library = ctypes.CDLL(_cuxla.__file__)
    allocator.allocator().set_record_stream_fn(_address(library.cuxla_torch_record_stream))
    allocator.allocator().set_reset_fn(_address(library.cuxla_torch_empty_cache))
    torch.cuda.memory.change_current_allocator(allocator)
    _whole_process = True


def use_xla_allocator_if_asked() -> None:
    """`use_xla_allocator()` where CUXLA_ONE_POOL=1: how the test suite, the
    model zoo and `bench train` run with PyTorch on XLA's pool."""
    if os.environ.get("CUXLA_ONE_POOL") == "1":
        use_xla_allocator()


def xla_allocator() -> Any:
    """A `torch.cuda.memory.CUDAPluggableAllocator` for a `torch.cuda.MemPool`:
    PyTorch's allocations in the pool's scope come from the memory pool XLA
    allocates from (cuxla's CUDA client is made with allocator="cuda_async",
    as for `use_xla_allocator`). PyTorch keeps what it frees in the MemPool
    for its next allocations there, as it does in any MemPool, until
    `torch.cuda.empty_cache()`; out of memory is PyTorch's OutOfMemoryError.
    Every call gives the same allocator, alive for the whole process.

        pool = torch.cuda.MemPool(cuxla.torch.xla_allocator().allocator())
        with torch.cuda.use_mem_pool(pool):
            ...
    """
    global _mem_pool_allocator
    _require_gpu()
    _xla_on_the_pool()
    if _mem_pool_allocator is None:
        _mem_pool_allocator = torch.cuda.memory.CUDAPluggableAllocator(
            _cuxla.__file__, "cuxla_torch_malloc_for_mem_pool", "cuxla_torch_free")
    return _mem_pool_allocator


def memory_pool_stats(device: Any = None) -> dict[str, int]:
    """Bytes the device's default pool holds and hands out, their peaks since
    the last `reset_memory_pool_peaks`, and of what it hands out, PyTorch's
    (through cuxla's allocator) and the rest's (XLA's)."""
    _require_gpu()
    ordinal = _ordinal(device)
    usage = _cuxla.memory_pool_usage(ordinal)
    if not _whole_process and torch.cuda.memory.get_allocator_backend() == "cudaMallocAsync":
        # PyTorch's own backend on the pool: it counts its bytes itself.
        usage["torch_bytes"] = torch.cuda.memory_allocated(ordinal)
        usage["torch_peak_bytes"] = torch.cuda.max_memory_allocated(ordinal)
    return {**usage, "xla_bytes": max(usage["used_bytes"] - usage["torch_bytes"], 0)}


def reset_memory_pool_peaks(device: Any = None) -> None:
    """The peaks of `memory_pool_stats` start again from the current usage."""
    _require_gpu()
    _cuxla.reset_memory_pool_peaks(_ordinal(device))


def usage_in_words(device: _cuxla.Device) -> str:
    """PyTorch's and XLA's memory on `device` (an XLA device of CUDA) and
    what the device has free, for an out-of-memory message."""
    ordinal = device.local_hardware_id
    free, total = torch.cuda.mem_get_info(ordinal)
    torch_part = f"PyTorch {_gib(torch_memory_allocated(ordinal))}"
    if not _whole_process:  # PyTorch's caching allocator holds more than it hands out
        torch_part += f" (its cache holds {_gib(torch.cuda.memory_reserved(ordinal))})"
    stats = device.memory_stats()
    if stats is None:
        xla_part = "XLA unknown (its plugin keeps no statistics)"
    else:
        xla_part = f"XLA {_gib(stats['bytes_in_use'])}"
        if stats["pool_bytes"] is not None:
            xla_part += f" (its pool holds {_gib(stats['pool_bytes'])})"
    return f"in use on cuda:{ordinal}: {torch_part}, {xla_part}; {_gib(free)} of {_gib(total)} free"


def _gib(size: int) -> str:
    return f"{size / 2**30:.2f} GiB"


def _require_gpu() -> None:
    driver = _cuxla.cuda_driver()
    if not driver["available"]:
        raise _cuxla.NoDeviceError(f"no GPU for one memory pool of PyTorch and XLA: {driver['why_not']}")
    if not torch.cuda.is_available():
        raise _cuxla.NoDeviceError(f"no GPU for one memory pool of PyTorch and XLA: PyTorch {torch.__version__} "
                                   "has no CUDA")


def _xla_on_the_pool() -> None:
    """cuxla's CUDA client allocating from the devices' default pools (made
    now if not yet), and those pools keeping what is freed for the next
    allocation, where XLA alone would give it back to the device."""
    # Set only while the client is made: child processes keep the user's choice.
    asked = "CUXLA_ALLOCATOR" in os.environ
    os.environ.setdefault("CUXLA_ALLOCATOR", _XLA_ALLOCATOR)
    try:
        client = _cuxla.client_for_platform("cuda")
    finally:
        if not asked:
            del os.environ["CUXLA_ALLOCATOR"]
    allocator = client.options["allocator"]
    if allocator != _XLA_ALLOCATOR:
        raise RuntimeError(f"XLA allocates from a pool of its own: cuxla's CUDA client was made with "
                           f"allocator={allocator!r}; make it with allocator='cuda_async' (CUXLA_ALLOCATOR="
                           f"cuda_async) to share one pool with PyTorch")
    for device in client.devices():
        _cuxla.keep_freed_memory_in_pool(device.local_hardware_id)


def _ordinal(device: Any) -> int:
    """The CUDA ordinal of a device as PyTorch names one (None: the current
    device, or device 0 before PyTorch's CUDA starts, which asking would start)."""
    if device is None:
        return torch.cuda.current_device() if torch.cuda.is_initialized() else 0
    device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"the memory pool is a CUDA device's, not {device}'s")
    return device.index if device.index is not None else torch.cuda.current_device()


def _address(function: ctypes._CFuncPtr) -> int:
    return ctypes.cast(function, ctypes.c_void_p).value
