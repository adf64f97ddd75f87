"""`python -m cuxla bench train`: step time and compile time of training under
eager PyTorch and torch.compile backends (inductor, cuxla)."""
from __future__ import annotations

import pathlib
import statistics
import time

import cuxla

from . import writers


def train(models: list[str], backends: list[str], steps: int, out_dir: str) -> int:
    """Step time and compile time of eager, inductor and cuxla training."""
    import copy

    import torch

    from .. import _models

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    size = "base" if cuda else "tiny"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    card = torch.cuda.get_device_name() if cuda else "CPU"
    print(f"cuxla bench train on {card}: {size} models, {steps} AdamW steps each; "
          "first step (compile) and p50 of the rest")
    rows = []
    for name in models:
        base = _models.WORKLOADS[name](device, size)
        for backend in backends:
            workload = copy.deepcopy(base)
            torch._dynamo.reset()
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            times: list[float] = []
            clock = [time.perf_counter()]

            def on_step(step, loss, times=times, clock=clock):
                sync()
                now = time.perf_counter()
                times.append(now - clock[0])
                clock[0] = now

            losses = _models.train(workload, steps, None if backend == "eager" else backend, on_step)
            steady = statistics.median(times[2:]) if len(times) > 2 else times[-1]
            row = {"model": name, "backend": backend, "first_step_s": times[0], "step_ms": steady * 1e3,
                   "compile_s": max(times[0] - steady, 0.0), "final_loss": losses[-1],
                   "peak_torch_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
                   # XLA's peak since its client started (the backends share it).
                   "peak_xla_gib": _xla_peak_gib() if cuda else None}
            rows.append(row)
            print(f"  {name:5s} {backend:9s} step {row['step_ms']:9.2f} ms   compile {row['compile_s']:7.2f} s   "
                  f"loss {losses[0]:.4f} -> {losses[-1]:.4f}"
                  + (f"   peak memory torch {row['peak_torch_gib']:.2f} GiB, XLA {row['peak_xla_gib']:.2f} GiB"
                     if cuda else ""), flush=True)
            del workload
    writers.write_train(rows, card, pathlib.Path(out_dir))
    return 0


def _xla_peak_gib() -> float:
    stats = cuxla._client.client_for_platform("cuda").memory_stats() or {}
    return (stats.get("peak_bytes_in_use") or 0) / 2**30
