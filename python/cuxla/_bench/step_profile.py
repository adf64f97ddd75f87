"""Where a training step's device time goes, for `bench train`: a few steps
under PyTorch's profiler, whose CUDA activity records every kernel and copy
of the process (XLA's as well as PyTorch's), summed by kind, with the time
the device was busy at all (kernels on several streams counted once), and
where it waited: each gap before a kernel, and how much of it the host had
not yet launched that kernel."""
from __future__ import annotations

import json
import os
import re
import tempfile
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
OTHER = "other"  # fusions, elementwise, reductions
# Inductor's pointwise, persistent-reduction and reduction kernels: named
# after every op they fuse ("triton_per_fused_add_addmm_native_layer_norm"
# adds an addmm's bias), none a product.
_INDUCTOR_ELEMENTWISE = re.compile(r"^triton_(poi|per|red)_")
_KERNELS_LISTED = 60  # the longest kernels a summary lists by name

STEP_START = "the step's start"  # what precedes a step's first kernel among the gaps
_STEP_MARK = "cuxla bench step"  # the profiler's range around each profiled step
# The trace's categories of device work (not the ranges PyTorch projects onto
# the device's timeline, which span idle time too), and of the host's calls
# that launch it (the runtime's, and the driver's, through which XLA launches).
_DEVICE_CATEGORIES = {"cuda": {"kernel", "gpu_memcpy", "gpu_memset"}, "cpu": {"cpu_op"}}
_LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver"}
_LONGEST_WAITS = 5


def kind_of(name: str) -> str:
    if _INDUCTOR_ELEMENTWISE.search(name):
        return OTHER
    return next((kind for kind, pattern in KINDS.items() if pattern.search(name)), OTHER)


def summarize(device_events: Iterable[tuple[str, float, float]], steps: int) -> dict:
    """Per step: the device's busy milliseconds (the union of its events'
    intervals), kernels and copies launched, milliseconds by kind, the
    three longest kernels by name, of all and of each kind, and the longest
    sixty with their kind and launches a step. `device_events`: (name, start
    µs, end µs)."""
    events = sorted(device_events, key=lambda e: e[1])
    busy_us, covered_to = 0.0, float("-inf")
    by_kind = dict.fromkeys([*KINDS, OTHER], 0.0)
    by_name: dict[str, float] = {}
    launches: dict[str, int] = {}
    for name, start, end in events:
        busy_us += max(end - max(start, covered_to), 0.0)
        covered_to = max(covered_to, end)
        by_kind[kind_of(name)] += end - start
        by_name[name] = by_name.get(name, 0.0) + end - start
        launches[name] = launches.get(name, 0) + 1

    def named(name: str) -> dict:
        return {"name": name[:80], "ms": by_name[name] / 1e3 / steps}

    ranked = sorted(by_name, key=lambda name: -by_name[name])  # the longest first

    def longest(kind: str | None = None) -> list[dict]:
        return [named(name) for name in ranked if kind is None or kind_of(name) == kind][:3]

    return {"device_busy_ms": busy_us / 1e3 / steps, "device_events": len(events) / steps,
            "ms_by_kind": {kind: us / 1e3 / steps for kind, us in by_kind.items()},
            "longest": longest(),
            "longest_by_kind": {kind: longest(kind) for kind in by_kind if by_kind[kind]},
            "kernels": [{**named(name), "kind": kind_of(name), "launches": launches[name] / steps}
                        for name in ranked[:_KERNELS_LISTED]]}


def waits(device_events: Iterable[tuple[str, float, float, float | None]],
          step_windows: Iterable[tuple[float, float]]) -> dict:
    """Per step, where the device waited: every gap from a step's start (on
    the host) to its last kernel's end in which the device ran nothing,
    summed; the part of each gap before the host launched the kernel that
    ends it (the device waiting for the host to launch); and the longest
    waits by the kernels either side (first the step's start), summed over
    the steps. `device_events`: (name, start µs, end µs, the host's launch
    of it µs or None where not recorded); `step_windows`: (start µs, end µs)
    of each step on the host, in the events' clock."""
    events = sorted(device_events, key=lambda e: e[1])
    windows = sorted(step_windows)
    idle_us = before_launch_us = 0.0
    by_pair: dict[tuple[str, str], list[float]] = {}
    for window_start, window_end in windows:
        before, covered_to = STEP_START, window_start
        for name, start, end, launched in events:
            if start < window_start or start > window_end:
                continue
            if start > covered_to:
                gap = start - covered_to
                idle_us += gap
                if launched is not None:
                    before_launch_us += min(gap, max(launched - covered_to, 0.0))
                pair = by_pair.setdefault((before, name), [0.0, 0])
                pair[0] += gap
                pair[1] += 1
            if end > covered_to:
                before, covered_to = name, end
    steps = max(len(windows), 1)
    longest = sorted(by_pair.items(), key=lambda item: -item[1][0])[:_LONGEST_WAITS]
    return {"idle_ms": idle_us / 1e3 / steps, "idle_before_launch_ms": before_launch_us / 1e3 / steps,
            "longest_waits": [{"after": after[:80], "before": name[:80], "ms": us / 1e3 / steps, "count": n / steps}
                              for (after, name), (us, n) in longest]}


def profile_steps(step: Callable[[], object], sync: Callable[[], None], steps: int, device: str = "cuda") -> dict:
    """`summarize` of the events on `device` ("cuda"; "cpu": PyTorch's CPU
    ops, nested ones overlapping) of `steps` steps under PyTorch's profiler,
    each waited for as a timed step is, and on CUDA their `waits`."""
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    sync()
    with profile(activities=activities) as profiler:
        for _ in range(steps):
            with record_function(_STEP_MARK):
                step()
                sync()
    trace = _trace_events(profiler)
    device_categories = _DEVICE_CATEGORIES[device]
    launches = {e["args"]["correlation"]: e["ts"] for e in trace
                if e.get("cat") in _LAUNCH_CATEGORIES and "correlation" in e.get("args", {})}
    device_events = [(e["name"], e["ts"], e["ts"] + e.get("dur", 0.0),
                      launches.get(e.get("args", {}).get("correlation"))) for e in trace
                     if e.get("cat") in device_categories]
    summary = summarize(((name, start, end) for name, start, end, _ in device_events), steps)
    if device == "cuda":
        windows = [(e["ts"], e["ts"] + e["dur"]) for e in trace
                   if e.get("cat") == "user_annotation" and e.get("name") == _STEP_MARK]
        summary.update(waits(device_events, windows))
    return summary


def _trace_events(profiler) -> list[dict]:
    """The profiler's events as its Chrome trace holds them (the only public
    form that keeps each kernel's launch: the correlation of the two)."""
    with tempfile.TemporaryDirectory(prefix="cuxla-step-profile-") as folder:
        path = os.path.join(folder, "trace.json")
        profiler.export_chrome_trace(path)
        with open(path) as trace:
            return [e for e in json.load(trace)["traceEvents"] if e.get("ph") == "X"]
