"""`python -m cuxla bench scale`: the data-parallel step over 1, 2, 4... devices."""
from __future__ import annotations

import pathlib
import statistics
import time

import cuxla

from . import writers


def scale(models: list[str], steps: int, out_dir: str) -> int:
    """Step time of DataParallel SGD over 1, 2, 4... devices (every GPU, or
    the CPU plugin's 4 devices), the global batch fixed: strong scaling."""
    import copy

    import torch

    from .. import _models
    from ..parallel import DataParallel

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    client = cuxla._client.client_for_platform("cuda" if cuda else "cpu")
    devices = client.devices()
    counts = [n for n in (1, 2, 4, 8) if n <= len(devices)]
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    card = torch.cuda.get_device_name() if cuda else "CPU"
    print(f"cuxla bench scale on {len(devices)} x {card}: data-parallel SGD steps over {counts} devices, "
          f"{'base' if cuda else 'tiny'} models; p50 of {steps} steps after the first")
    rows = []
    # Not the CNN: DataParallel reads buffers but does not update them (BatchNorm's running statistics).
    for name in [m for m in models if m != "cnn"]:
        base = _models.WORKLOADS[name](device, "base" if cuda else "tiny")
        for n in counts:
            if base.batch[0].shape[0] % n:
                continue
            mesh = cuxla.Mesh(devices[:n], ["data"])
            start = time.perf_counter()
            dp = DataParallel(copy.deepcopy(base.model), base.loss, mesh, lr=1e-3, example_batch=base.batch,
                              client=client)
            dp.step(base.batch).item()
            compile_s = time.perf_counter() - start
            times = []
            for _ in range(steps):
                start = time.perf_counter()
                loss = dp.step(base.batch)
                sync()
                loss.item()
                times.append(time.perf_counter() - start)
            row = {"model": name, "devices": n, "step_ms": statistics.median(times) * 1e3, "compile_s": compile_s}
            rows.append(row)
            print(f"  {name:5s} {n} device(s): step {row['step_ms']:9.2f} ms   compile + first step "
                  f"{compile_s:6.2f} s", flush=True)
    writers.write_scale(rows, card, pathlib.Path(out_dir))
    return 0
