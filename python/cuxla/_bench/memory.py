"""`python -m cuxla bench memory`: PyTorch and XLA on one GPU memory pool
(`cuxla.torch.use_xla_allocator`) against two pools side by side, and eager
PyTorch alone: peak device memory of compiled training as the user sees it
(`torch.cuda.mem_get_info`), with eager parts (the optimizer; a model whose
dropout stays in PyTorch), the largest batch that fits a memory budget, and
an eager op's host time with each allocator. Each measurement runs in a
process of its own (`memory_child`)."""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

from . import writers
from .memory_child import MEASURES, SETTINGS

_XLA_LOG_LINE = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d")


def memory(measures: list[str], out_dir: str) -> int:
    import torch

    if not torch.cuda.is_available():
        print("bench memory measures a CUDA GPU's memory pools: this machine has no GPU PyTorch can use")
        return 1
    card = torch.cuda.get_device_name()
    print(f"cuxla bench memory on {card}: each measurement in a process of its own")
    unknown = sorted(set(measures) - set(MEASURES))
    if unknown:
        print(f"bench memory measures {', '.join(MEASURES)}, not {', '.join(unknown)}")
        return 1
    rows = []
    for measure, title in ((m, MEASURES[m]) for m in measures):
        for setting in SETTINGS:
            row = _measure(setting, measure) or {}
            row = row if "measure" in row else {"setting": setting, "measure": title, **row}
            rows.append(row)
            print(f"  {title:34s} {setting:9s} {writers.memory_cell(row)}", flush=True)
            # The files after each row: a run cut short leaves what it measured.
            writers.write_memory(rows, card, SETTINGS, pathlib.Path(out_dir), quiet=True)
    writers.write_memory(rows, card, SETTINGS, pathlib.Path(out_dir))
    return 0


# What would change a setting behind its name: the allocators' own switches.
# A child compiles cold (no compile cache): a cached executable skips XLA's
# autotuning, whose buffers count in the peak of whichever setting compiled.
_SETTING_ENVIRONMENT = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "CUXLA_ALLOCATOR", "CUXLA_PREALLOCATE",
                        "CUXLA_MEM_FRACTION", "CUXLA_ONE_POOL")


def _measure(setting: str, measure: str, timeout_s: float = 300) -> dict:
    """The child's row, or {"error": why} where it failed or ran out of time."""
    env = {k: v for k, v in os.environ.items() if k not in _SETTING_ENVIRONMENT}
    env["CUXLA_CACHE_DIR"] = ""
    try:
        child = subprocess.run([sys.executable, "-m", "cuxla._bench.memory_child", setting, measure],
                               capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"no answer within {timeout_s:.0f} s"}
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    if child.returncode != 0 or not lines:
        # The error's last line, not the XLA log lines ("E1204 10:11:12.123456 ...") printed after it.
        said = [line for line in child.stderr.strip().splitlines() if not _XLA_LOG_LINE.match(line)]
        return {"error": (said or ["no output"])[-1]}
    return json.loads(lines[-1])
