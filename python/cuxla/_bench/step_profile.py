"""Where a training step's device time goes, for `bench train`: a few steps
under PyTorch's profiler, whose CUDA activity records every kernel and copy
of the process (XLA's as well as PyTorch's), summed by kind, with the time
the device was busy at all (kernels on several streams counted once)."""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable

# A kernel's kind by its name: attention kernels, matrix products (cuBLAS,
# CUTLASS, XLA's GEMM fusions, inductor's templates), PyTorch's multi-tensor
# loops (the optimizer's), copies and fills.
KINDS = {  # in this order: attention kernels' names may hold "cutlass" or "gemm"
    "attention": re.compile(r"flash|fmha|attention|attn", re.IGNORECASE),
    "matmul": re.compile(r"gemm|xmma|cutlass|nvjet|cublas|wgmma|_dot_|dot_fusion|triton_tem|_b?mm_|addmm",
                         re.IGNORECASE),
    "optimizer": re.compile(r"multi_tensor_apply|adam", re.IGNORECASE),
    "copies": re.compile(r"^mem(cpy|set)|copy_kernel", re.IGNORECASE),
}
OTHER = "other"  # fusions, elementwise ops, reductions


def kind_of(name: str) -> str:
    return next((kind for kind, pattern in KINDS.items() if pattern.search(name)), OTHER)


def summarize(device_events: Iterable[tuple[str, float, float]], steps: int) -> dict:
    """Per step: the device's busy milliseconds (the union of its events'
    intervals), kernels and copies launched, milliseconds by kind, and the
    three longest kernels by name, of all and of each kind. `device_events`:
    (name, start µs, end µs)."""
    events = sorted(device_events, key=lambda e: e[1])
    busy_us, covered_to = 0.0, float("-inf")
    by_kind = dict.fromkeys([*KINDS, OTHER], 0.0)
    by_name: dict[str, float] = {}
    for name, start, end in events:
        busy_us += max(end - max(start, covered_to), 0.0)
        covered_to = max(covered_to, end)
        by_kind[kind_of(name)] += end - start
        by_name[name] = by_name.get(name, 0.0) + end - start
    def longest(names: Iterable[str]) -> list[dict]:
        return [{"name": name[:80], "ms": by_name[name] / 1e3 / steps}
                for name in sorted(names, key=lambda name: -by_name[name])[:3]]

    return {"device_busy_ms": busy_us / 1e3 / steps, "device_events": len(events) / steps,
            "ms_by_kind": {kind: us / 1e3 / steps for kind, us in by_kind.items()},
            "longest": longest(by_name),
            "longest_by_kind": {kind: longest(name for name in by_name if kind_of(name) == kind)
                                for kind in by_kind if by_kind[kind]}}


def profile_steps(step: Callable[[], object], sync: Callable[[], None], steps: int, device: str = "cuda") -> dict:
    """`summarize` of the events on `device` ("cuda"; "cpu": PyTorch's CPU
    ops, nested ones overlapping) of `steps` steps under PyTorch's profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    wanted = torch.autograd.DeviceType.CUDA if device == "cuda" else torch.autograd.DeviceType.CPU
    sync()
    with profile(activities=activities) as profiler:
        for _ in range(steps):
            step()
        sync()
    return summarize(((e.name, e.time_range.start, e.time_range.end) for e in profiler.events()
                      if e.device_type == wanted), steps)
