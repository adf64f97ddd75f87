"""One backend's training for `bench train`, in a process of its own, so that
its compile is cold (or warm, from the caches an earlier process left) and its
peak memory its own. Steered over stdin by `train.py`; each command is
answered with one JSON line on stdout.

    python -m cuxla._bench.train_child MODEL BACKEND SIZE PRECISION   (PRECISION: float32 or tf32)
    (answers the first step's time, then)  run N | report | phases | host N | profile N | exit
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

from .. import _models, _torch_memory
from .._errors import one_line
from . import step_profile


def main(model_name: str, backend: str, size: str, precision: str) -> int:
    import torch

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    if cuda:
        _torch_memory.use_xla_allocator_if_asked()
    # Every backend at one precision; cuxla lowers float32 matrix products at PyTorch's.
    tf32 = precision == "tf32"
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = tf32
    # One-time imports are not the model's compile: made before the clock runs
    # (and their time answered beside it). Inductor's compiler modules and
    # Triton for both compiled backends: AOTAutograd's cache reads inductor's
    # code for its keys and imports Triton to check its version, under any backend.
    setting_up = time.perf_counter()
    if backend != "eager":
        import torch._inductor.compile_fx  # noqa: F401
        from torch.utils._triton import has_triton_package

        if has_triton_package():
            import triton  # noqa: F401
    if backend == "cuxla":
        import cuxla.dynamo

        cuxla.dynamo.time_on_device = cuda  # each step's XLA device time, for the split of a step

        from .. import _torchax

        _torchax.environment()
        cuxla._client.client_for_platform(device)  # the plugin loaded, its device opened: not a compile either
    imports_s = time.perf_counter() - setting_up
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    workload = _models.WORKLOADS[model_name](device, size)
    step = _models.training_step(workload, None if backend == "eager" else backend)

    def timed_step() -> tuple[float, float]:
        start = time.perf_counter()
        loss = step()
        sync()
        return time.perf_counter() - start, loss.item()

    def run_steps(count: int) -> list[tuple[float, float]]:  # the timed steps after the first, apart in a profile
        return [timed_step() for _ in range(count)]

    if cuda:
        _torch_memory.reset_torch_peak_memory_stats()
    first_s, loss = timed_step()
    calls_before = _xla_calls(backend)  # the steps after the first: what one step costs
    timed_steps = 0
    first = {"first_step_s": first_s, "loss": loss, "tokens": workload.tokens, "imports_s": imports_s}
    if backend == "cuxla":  # of the first step: cuxla's lowering and XLA's compiles (or their loads), AOTAutograd's
        report = cuxla.dynamo.report()
        first["cuxla_compile_s"] = report["lowering_s"] + report["compile_s"]
        first["aot_autograd_s"] = report["aot_autograd_s"]
        first["graphs_from_aot_autograd_cache"] = [report["graphs_from_aot_autograd_cache"], report["graphs"]]
    _answer(first)
    for line in sys.stdin:
        command, *argument = line.split()
        if command == "run":
            steps = run_steps(int(argument[0]))
            timed_steps += len(steps)
            _answer({"step_s": [s for s, _ in steps], "loss": steps[-1][1]})
        elif command == "report":
            _answer(_report(backend, cuda, calls_before, timed_steps))
        elif command == "phases":  # after the report: this step is not among those it counts
            _answer(memory_by_phase(step, sync, *_peak_readers(backend)) if cuda else {})
        elif command == "host":  # after the report: these steps are not among those it counts
            _answer(host_by_phase(step, sync, int(argument[0])))
        elif command == "profile":  # after the report: these steps are not among those it counts
            _answer(_profile(step, sync, int(argument[0])) if cuda else {})
        elif command == "exit":
            break
    return 0


def memory_by_phase(step, sync, peak, reset) -> dict:
    """Of one step, each phase's peak bytes in use (GiB), by `peak()`, its
    counter started again by `reset()` as each phase begins; {} where
    there is no such counter."""
    if peak is None:
        return {}
    peaks = {}

    def at_phase_end(phase: str) -> None:
        sync()
        peaks[phase] = peak() / 2**30
        reset()

    sync()
    reset()
    step(at_phase_end)
    return peaks


def host_by_phase(step, sync, steps: int) -> dict:
    """Where the host's time of a step goes (ms, medians over `steps` steps,
    each started with the device idle): each phase's, from the end of the
    one before (no wait for the device inside a step), then the wait for the
    device to finish the step's work. A wait near zero: the host, not the
    device, set the step's pace."""
    taken: dict[str, list[float]] = {}
    for _ in range(steps):
        sync()
        ends = [("start", time.perf_counter())]
        step(lambda phase: ends.append((phase, time.perf_counter())))
        sync()
        ends.append(("waiting for the device", time.perf_counter()))
        for (_, before), (phase, end) in zip(ends, ends[1:]):
            taken.setdefault(phase, []).append(1e3 * (end - before))
    return {phase: statistics.median(ms) for phase, ms in taken.items()}


def _peak_readers(backend: str) -> tuple:
    """The peak of bytes in use that one phase can be measured by, and what
    starts it again (`reset_torch_peak_memory_stats`, the pool's peaks too
    under one pool): PyTorch's allocator's, with one pool the pool's (both
    runtimes at once); none for cuxla beside a pool of XLA's own, whose
    peak cannot be started again."""
    if _torch_memory.uses_xla_allocator():
        peak = lambda: _torch_memory.memory_pool_stats()["used_peak_bytes"]  # noqa: E731
    elif backend == "cuxla":
        return None, None
    else:
        import torch

        peak = torch.cuda.max_memory_allocated
    return peak, _torch_memory.reset_torch_peak_memory_stats


def _profile(step, sync, steps: int) -> dict:
    """Where the device time of `steps` steps goes; a profiler that fails is said, not raised."""
    try:
        return step_profile.profile_steps(step, sync, steps)
    except Exception as error:  # the profiler's (CUPTI's) own failure: the run's other numbers stand
        return {"error": one_line(error)}


def _xla_calls(backend: str) -> tuple[int, float, float]:
    """XLA program calls so far, the host's seconds in them and (on a GPU) their device seconds."""
    if backend != "cuxla":
        return 0, 0.0, 0.0
    import cuxla.dynamo

    report = cuxla.dynamo.report()
    return report["program_calls"], report["call_s"], report["device_s"]


def _report(backend: str, cuda: bool, calls_before: tuple[int, float, float], timed_steps: int) -> dict:
    """Peak memory, graph breaks and, for cuxla, what ran in XLA and what its
    calls and compile cost, over the steps timed after the first."""
    import cuxla.dynamo

    report = cuxla.dynamo.report()
    row = {"peak_torch_gib": _torch_memory.torch_max_memory_allocated() / 2**30 if cuda else None,
           "peak_xla_gib": _torch_memory.xla_max_memory_allocated() / 2**30 if cuda and backend == "cuxla" else 0.0,
           "graph_breaks": report["graph_breaks"]}
    if cuda and _torch_memory.uses_xla_allocator():  # one pool: its peak is both runtimes' at once, exactly
        row["peak_pool_gib"] = _torch_memory.memory_pool_stats()["used_peak_bytes"] / 2**30
    if backend != "cuxla":
        return {**row, **dict.fromkeys(("graphs", "xla_programs", "aten_ops", "xla_ops", "lowering_s",
                                        "xla_compile_s", "xla_calls_per_step", "host_ms_in_xla_calls_per_step",
                                        "device_ms_in_xla_per_step", "largest_xla_program_gib"))}
    calls, call_s, device_s = (now - before for now, before in zip(_xla_calls(backend), calls_before))
    return {**row, "graphs": report["graphs"], "xla_programs": report["xla_programs"],
            "aten_ops": report["aten_ops"], "xla_ops": report["xla_ops"], "lowering_s": report["lowering_s"],
            "xla_compile_s": report["compile_s"], "xla_calls_per_step": calls / timed_steps,
            "host_ms_in_xla_calls_per_step": 1e3 * call_s / timed_steps,
            "device_ms_in_xla_per_step": 1e3 * device_s / timed_steps if cuda else None,
            "largest_xla_program_gib": [size / 2**30 for size in report["largest_xla_program_bytes"]]}


_answers = sys.stdout  # the parent's channel


def _answer(values: dict) -> None:
    print(json.dumps(values), file=_answers, flush=True)


if __name__ == "__main__":
    # Answers go to the parent through stdout as it was at the start; what the
    # libraries print (Python or native code) goes to stderr, so that no line
    # of theirs can be taken for an answer or run into one.
    _answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.exit(main(*sys.argv[1:5]))
