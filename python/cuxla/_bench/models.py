"""`python -m cuxla bench models`: the model zoo (cuxla._zoo) trained eager and
under cuxla, each model in a child process."""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import sys
import time

from . import writers


def models(names: list[str], steps: int = 3, jobs: int = 1, timeout_s: float = 600, out_dir: str = "bench-results",
           dropout: str = "zero", tolerance: float | None = None, dtype: str = "float32") -> int:
    """The model zoo, eager against cuxla, each model in a child process
    (`python -m cuxla._zoo run`), `jobs` at a time."""
    import concurrent.futures

    from .. import _zoo

    tolerance = _zoo.TOLERANCES[dtype] if tolerance is None else tolerance
    # The children share the cores rather than each taking all of them.
    threads = str(max(1, (os.cpu_count() or 1) // jobs))
    command = ["--steps", str(steps), "--dropout", dropout, "--tolerance", str(tolerance), "--dtype", dtype]
    print(f"cuxla bench models: {len(names)} models, {steps} AdamW steps each in {dtype}, eager vs cuxla, "
          f"{jobs} at a time, {timeout_s:g} s each at most", flush=True)
    started = time.perf_counter()
    rows: dict[str, dict] = {}
    # The rows so far, rewritten as each model ends: what a run cut short (a
    # call's time limit) leaves behind, for writers.write_models.
    partial = pathlib.Path(out_dir) / "models-partial.json"
    partial.parent.mkdir(parents=True, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(_run_child, name, command, timeout_s, threads): name for name in names}
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            row = rows[futures[future]] = future.result()
            print(f"[{done:2d}/{len(names)}] {row['model']:40s} {row['verdict']:19s} {row['wall_s']:6.1f} s  "
                  f"{_shape_of_run(row)}{row['detail']}", flush=True)
            partial.write_text(json.dumps([rows[n] for n in names if n in rows], indent=1))
    ordered = [rows[name] for name in names]
    print(f"{len(names)} models in {time.perf_counter() - started:.0f} s")
    writers.write_models(ordered, steps, dropout, tolerance, dtype, pathlib.Path(out_dir))
    partial.unlink()
    return 0


def _run_child(name: str, options: list[str], timeout_s: float, threads: str) -> dict:
    """One model's row: the child's JSON line, or what became of the child."""
    import signal
    import subprocess

    start = time.perf_counter()
    # A session of its own, so that a timeout kills whatever the child started too.
    child = subprocess.Popen([sys.executable, "-m", "cuxla._zoo", "run", name, *options], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True,
                             env={**os.environ, "OMP_NUM_THREADS": threads})
    try:
        out, err = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):  # it may have ended meanwhile
            os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        row = {"verdict": "timeout", "detail": f"no result after {timeout_s:g} s"}
    else:
        row = _last_json_line(out)
        if child.returncode or row is None:
            how = (f"signal {signal.Signals(-child.returncode).name}" if child.returncode < 0
                   else f"exit code {child.returncode}")
            last = next((line for line in reversed(err.splitlines()) if line.strip()), "")
            row = {"verdict": "crashed", "detail": f"{how}: {last.strip()}"[:200]}
    if row["verdict"] in ("timeout", "crashed", "error", "eager failed"):
        row["log_tail"] = err.splitlines()[-30:]
    return {"model": name, **row, "wall_s": time.perf_counter() - start}


def _shape_of_run(row: dict) -> str:
    """Graph breaks, XLA programs per graph and the share of ATen ops in XLA,
    for the progress line (a log cut short still holds them)."""
    if row.get("xla_op_share") is None:
        return ""
    return (f"breaks {row.get('graph_breaks', '-')}, programs/graph {row['programs_per_graph']:.2g}, "
            f"XLA ops {100 * row['xla_op_share']:.1f}%; ")


def _last_json_line(out: str) -> dict | None:
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None
