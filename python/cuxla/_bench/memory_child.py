"""One measurement of `bench memory` under one allocator setting, in a
process of its own (PyTorch's allocator is chosen before its first CUDA
allocation, and one measurement's caches must not hide the next one's
peak). Prints one JSON line.

    python -m cuxla._bench.memory_child eager|two_pools|one_pool MEASURE
"""
from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from collections.abc import Callable

import torch

SETTINGS = {
    "eager": "eager PyTorch alone, its caching allocator",
    "two_pools": "cuxla: PyTorch's caching allocator beside XLA's BFC allocator",
    "one_pool": "cuxla: PyTorch and XLA on one pool (cuxla.torch.use_xla_allocator)",
}


def _device_used() -> int:
    free, total = torch.cuda.mem_get_info()
    return total - free


def _emit(**row) -> None:
    if row["setting"] != "eager":  # a graph left to PyTorch would make cuxla's row an eager one
        import cuxla.dynamo

        report = cuxla.dynamo.report()
        row["xla_op_share"] = report["xla_ops"] / report["aten_ops"] if report["aten_ops"] else None
        row["backward_programs"] = cuxla.dynamo.backward_programs  # CUXLA_BACKWARD_PROGRAMS, passed on
    print(json.dumps(row), flush=True)


def _training_peak(setting: str, name: str, workload, steps: int = 5) -> None:
    """Device memory in use as the user sees it (mem_get_info, after each
    step: caches keep what a step took), over what was in use before."""
    from .. import _models, _torch_memory

    # PyTorch's statistics through _torch_memory: on one pool PyTorch keeps none.
    base, torch_base = _device_used(), _torch_memory.torch_memory_allocated()
    _torch_memory.reset_torch_peak_memory_stats()
    if setting == "one_pool":
        _torch_memory.reset_memory_pool_peaks()
        pool_base = _torch_memory.memory_pool_stats()["used_bytes"]
    step = _models.training_step(workload, None if setting == "eager" else "cuxla")
    peak, times = 0, []
    for _ in range(steps):
        start = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        peak = max(peak, _device_used() - base)
    # With two pools, each runtime's own peak allocations: XLA's is what the
    # pool's bound is measured against (one pool within 5% of the larger of
    # eager's peak and XLA's own).
    own = {"torch_peak_gib": (_torch_memory.torch_max_memory_allocated() - torch_base) / 2**30,
           "xla_peak_gib": _torch_memory.xla_max_memory_allocated() / 2**30} if setting == "two_pools" else {}
    # The most bytes in use at once (tensors, XLA's buffers and scratch), over
    # those before: what the steps need, whatever the allocators keep besides.
    # Eager's from PyTorch's statistics; one pool's from the pool, both runtimes in it.
    if setting == "eager":
        own["need_gib"] = (_torch_memory.torch_max_memory_allocated() - torch_base) / 2**30
    elif setting == "one_pool":
        own["need_gib"] = (_torch_memory.memory_pool_stats()["used_peak_bytes"] - pool_base) / 2**30
    _emit(setting=setting, measure=name, peak_gib=peak / 2**30, step_ms=statistics.median(times[1:]) * 1e3,
          loss=loss.item(), **own)


def _trains(setting: str, batch: int) -> bool:
    """Whether two MLP training steps at `batch` fit in what the device has left."""
    from .. import _models

    # Each batch its own static compile: Dynamo would make the batch dimension
    # symbolic at the second size and run eagerly past its recompile limit.
    torch._dynamo.reset()
    gc.collect()  # the last try's model and optimizer, and an out-of-memory's traceback
    try:
        step = _models.training_step(_models.mlp("cuda", "base", batch=batch),
                                     None if setting == "eager" else "cuxla")
        for _ in range(2):
            step().item()
        return True
    except (RuntimeError, MemoryError) as error:  # torch.OutOfMemoryError is a RuntimeError
        if "out of memory" not in str(error).lower():  # cuxla's MemoryError says so too
            raise
        return False


def largest_that_fits(fits: Callable[[int], bool], start: int = 256, limit: int = 1 << 22) -> int:
    """The largest size that `fits`, 0 if `start` does not: doubling from
    `start`, then by eighths of the last size that fit."""
    largest, size = 0, start
    while size <= limit and fits(size):
        largest, size = size, size * 2
    eighth = largest // 8
    while eighth and largest + eighth < size and fits(largest + eighth):
        largest += eighth
    return largest


def _largest_batch(setting: str, budget: int) -> None:
    """The largest MLP batch whose training fits in `budget` bytes of the
    device, the rest taken by a block of PyTorch's."""
    free, _ = torch.cuda.mem_get_info()
    ballast = torch.empty(max(free - budget, 0), dtype=torch.uint8, device="cuda")  # noqa: F841
    batch = largest_that_fits(lambda batch: _trains(setting, batch))
    _emit(setting=setting, measure=MEASURES["batch"], budget_gib=budget / 2**30, batch=batch)


def _allocation_cost(setting: str, ops: int = 20000) -> None:
    """Host µs per eager op that makes a new tensor (a + b, 1 KiB)."""
    a = torch.ones(256, device="cuda")
    for _ in range(1000):
        a + a
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(ops):
        a + a
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    _emit(setting=setting, measure=MEASURES["op"], us_per_op=elapsed / ops * 1e6)


# Each measurement: its name on the command line, and in the table.
MEASURES = {
    "op": "eager op with a new tensor",
    "bert": "BERT-base 16 x 128 training",
    "bert-dropout": "BERT-base, dropout 0.1 in PyTorch",
    "batch": "largest MLP batch",
}


def main(setting: str, measure: str) -> int:
    import cuxla
    import cuxla.dynamo
    from cuxla import _models, _torch_memory

    if setting == "one_pool":
        _torch_memory.use_xla_allocator()
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.cuda.init()
    if setting != "eager":
        cuxla._client.client_for_platform("cuda")  # its context and options, before the baseline
    if measure == "op":
        _allocation_cost(setting)
    elif measure == "bert":
        _training_peak(setting, MEASURES[measure], _models.bert("cuda", "base"))
    elif measure == "bert-dropout":
        cuxla.dynamo.fallback_random = True  # the graph is cut around each dropout
        _training_peak(setting, MEASURES[measure], _models.bert("cuda", "base", dropout=0.1))
    else:
        _largest_batch(setting, budget=8 << 30)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
