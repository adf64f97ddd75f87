"""`python -m cuxla bench memory`: PyTorch and XLA on one GPU memory pool
(`cuxla.torch.use_xla_allocator`) against two pools side by side, and eager
PyTorch alone: peak device memory of compiled training as the user sees it
(`torch.cuda.mem_get_info`), with eager parts (the optimizer; a model whose
dropout stays in PyTorch), the largest batch that fits a memory budget, and
an eager op's host time with each allocator. Each measurement runs in a
process of its own (`memory_child`)."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from . import writers
from .memory_child import MEASURES, SETTINGS


def memory(out_dir: str) -> int:
    import torch

    if not torch.cuda.is_available():
        print("bench memory measures a CUDA GPU's memory pools: this machine has no GPU PyTorch can use")
        return 1
    card = torch.cuda.get_device_name()
    print(f"cuxla bench memory on {card}: each measurement in a process of its own")
    rows = []
    for measure in MEASURES:
        for setting in SETTINGS:
            child = subprocess.run([sys.executable, "-m", "cuxla._bench.memory_child", setting, measure],
                                   capture_output=True, text=True, timeout=1800)
            lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
            if child.returncode != 0 or not lines:
                error = (child.stderr.strip().splitlines() or ["no output"])[-1]
                row = {"setting": setting, "measure": measure, "error": error}
            else:
                row = json.loads(lines[-1])
            rows.append(row)
            print(f"  {measure:30s} {setting:9s} {writers.memory_cell(row)}", flush=True)
    writers.write_memory(rows, card, SETTINGS, pathlib.Path(out_dir))
    return 0
