"""`python -m cuxla bench handoff|train|scale|models`: PyTorch <-> XLA handoffs
side by side; training step and compile times of torch.compile backends; the
data-parallel step over 1, 2, 4... devices; the model zoo (cuxla._zoo)
trained eager and under cuxla, compared. Each writes a table (Markdown, JSON)
and a plot (PNG).

handoff:

Every handoff is timed on the host per call (p50, p90), which is its whole
cost: a zero-copy handoff enqueues no device work beyond an event. The copy
baselines (a device clone, a host round trip) are timed to completion, since
their cost is the copy. One run measures every method at every size, prints
the table as it goes, and writes a table (Markdown, JSON) and a plot (PNG).
"""
from __future__ import annotations

import collections
import contextlib
import json
import os
import pathlib
import statistics
import sys
import time
from typing import Callable

# JAX's defaults take 75% of the GPU up front: off, so that PyTorch keeps room.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np

import cuxla

SIZES = [4, 4 << 10, 256 << 10, 4 << 20, 64 << 20, 256 << 20, 1 << 30]


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def _time(call: Callable[[], object], sync: Callable[[], None], budget_s: float, max_runs: int,
          min_runs: int = 5, prepare: Callable[[], None] | None = None) -> list[float]:
    """Per-call seconds: warm up, then run until `max_runs` or `budget_s`.
    `prepare` runs untimed before each call."""
    for _ in range(3):
        call()
    sync()
    samples: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(samples) < max_runs and (len(samples) < min_runs or time.perf_counter() < deadline):
        if prepare is not None:
            prepare()
        start = time.perf_counter()
        result = call()
        sync()
        samples.append(time.perf_counter() - start)
        del result
    return samples


def _fmt_us(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:9.1f}" if us < 1e5 else f"{us:9.0f}"


def handoff(max_bytes: int | None = None, out_dir: str = "bench-results", budget_s: float = 1.0) -> int:
    import torch

    import cuxla.torch as ct

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    client = cuxla._client.client_for_platform("cuda" if cuda else "cpu")
    limit = max_bytes or ((1 << 30) if cuda else (256 << 20))
    sizes = [s for s in SIZES if s <= limit]
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    nothing = lambda: None  # noqa: E731

    try:
        import jax
        import jax.dlpack
        jax_device = jax.devices("gpu" if cuda else "cpu")[0]
    except Exception as error:  # JAX is a comparison, not a requirement
        print(f"(JAX not available: {error}; its columns are skipped)")
        jax = None

    card = torch.cuda.get_device_name() if cuda else "CPU"
    print(f"cuxla bench handoff on {card}, {client.platform} plugin PJRT C API "
          f"{'.'.join(map(str, client.api_version))}; p50 / p90 in µs per call")
    # A method gives (call, sync[, prepare]) for a tensor.
    methods: dict[str, Callable[[torch.Tensor], tuple]] = {}

    def cuxla_import(t):
        return (lambda: cuxla.from_dlpack(t)), nothing

    def cuxla_import_busy(t):
        # ~10 µs of GPU work queued on PyTorch's stream before each import, so
        # that XLA must be ordered after it on the device.
        return (lambda: cuxla.from_dlpack(t)), sync, (lambda: torch.cuda._sleep(20_000))

    def cuxla_export(t):
        a = cuxla.from_dlpack(t)
        return (lambda: ct.to_torch(a)), nothing

    methods["cuxla import (torch -> XLA)"] = cuxla_import
    if cuda:
        methods["cuxla import, torch stream busy"] = cuxla_import_busy
        stream, why_not = client._compute_stream(client.devices()[0])
        print(f"  busy imports: XLA's compute stream waits for PyTorch's" if stream else
              f"  busy imports: through PJRT's external-ready streams ({why_not})")
        if stream:  # the route of plugins without FFI, side by side
            ready_stream_client = _ready_stream_client()

            def cuxla_import_busy_ready_stream(t):
                return ((lambda: cuxla.from_dlpack(t, client=ready_stream_client)), sync,
                        (lambda: torch.cuda._sleep(20_000)))

            methods["  busy, via PJRT ready stream"] = cuxla_import_busy_ready_stream
    methods["cuxla export (XLA -> torch)"] = cuxla_export
    if jax is not None:
        def jax_import(t):
            return (lambda: jax.dlpack.from_dlpack(t)), nothing

        def jax_export(t):
            j = jax.dlpack.from_dlpack(t)
            return (lambda: torch.from_dlpack(j)), nothing

        methods["jax.dlpack.from_dlpack(torch)"] = jax_import
        methods["torch.from_dlpack(jax)"] = jax_export
    methods["device clone (t.clone)"] = lambda t: ((lambda: t.clone()), sync)
    if cuda:
        methods["host round trip (t.cpu().cuda())"] = lambda t: ((lambda: t.cpu().to(device)), sync)

    rows: list[dict] = []
    header = f"{'method':34s}" + "".join(f"{_size_name(s):>22s}" for s in sizes)
    print(header)
    for name, make in methods.items():
        line = f"{name:34s}"
        for size in sizes:
            t = torch.ones(max(size // 4, 1), dtype=torch.float32, device=device)
            call, method_sync, *prepare = make(t)
            runs = 2000 if size <= (4 << 20) else 50
            if prepare:  # the stream must stay busy: sync only at the end
                samples = _time(call, nothing, budget_s, runs, prepare=prepare[0])
                method_sync()
            else:
                samples = _time(call, method_sync, budget_s, runs)
            p50, p90 = _percentiles(samples)
            rows.append({"method": name, "bytes": size, "p50_us": p50 * 1e6, "p90_us": p90 * 1e6,
                         "runs": len(samples)})
            line += f"{_fmt_us(p50)} /{_fmt_us(p90)}  "
            del t, call
            sync()
        print(line, flush=True)

    program_rows = _program_overhead(client, ct, torch, device, sync, jax, budget_s)
    rows.extend(program_rows)
    _write(rows, sizes, card, cuda, pathlib.Path(out_dir))
    return 0


def _ready_stream_client():
    """A second CUDA client whose compute stream stays unknown, so that its
    imports wait through PJRT's external-ready streams."""
    saved = os.environ.get("CUXLA_COMPUTE_STREAM")
    os.environ["CUXLA_COMPUTE_STREAM"] = "0"
    try:
        client = cuxla.Client("cuda")
        client._compute_stream(client.devices()[0])  # probed now, with the variable set
    finally:
        if saved is None:
            del os.environ["CUXLA_COMPUTE_STREAM"]
        else:
            os.environ["CUXLA_COMPUTE_STREAM"] = saved
    return client


def _size_name(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size >> shift} {unit}"
    return f"{size} B"


ADD_ONE = """
func.func public @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %one = stablehlo.constant dense<1.0> : tensor<{n}xf32>
  %0 = stablehlo.add %x, %one : tensor<{n}xf32>
  return %0 : tensor<{n}xf32>
}}
"""


_ROUNDS = 5


def _program_overhead(client, ct, torch, device, sync, jax, budget_s) -> list[dict]:
    """torch -> XLA program -> torch: cuxla.torch.call against the bare execute
    on imported Arrays, and the same through JAX."""
    n = 1 << 18  # 1 MiB of float32
    t = torch.ones(n, device=device)
    exe = cuxla.compile(ADD_ONE.format(n=n), client=client)
    a = cuxla.from_dlpack(t)
    cases = {
        "execute on Arrays (bare)": lambda: exe(a),
        "cuxla.torch.call (torch -> torch)": lambda: ct.call(exe, t),
        # Its view of t is kept from call to call; a tensor it has not seen
        # costs a new view (the t.view(n) that makes one is timed too).
        "  cuxla.torch.call, a new tensor object each call": lambda: ct.call(exe, t.view(n)),
        # Where the overhead of a call on new tensors goes: the view, or the export.
        "  part: execute on a fresh import": lambda: exe(t),
        "  part: execute, export the output": lambda: ct.to_torch(exe(a)[0]),
    }
    if jax is not None:
        jitted = jax.jit(lambda x: x + 1.0)
        cases["JAX: from_dlpack -> jit -> torch.from_dlpack"] = (
            lambda: torch.from_dlpack(jitted(jax.dlpack.from_dlpack(t))))
    print("\ntorch -> XLA program (x + 1, 1 MiB) -> torch; host µs per call: back to back (the GPU "
          f"still busy with the calls before), from an idle GPU, and to completion; the cases take "
          f"turns in {_ROUNDS} rounds, so that a drift of the machine's speed weighs on all alike")
    modes = {"dispatch": {}, "idle": {"prepare": sync}, "complete": {"sync": sync}}
    samples = {(name, mode): [] for name in cases for mode in modes}
    for _ in range(_ROUNDS):
        for mode, how in modes.items():
            for name, call in cases.items():
                samples[name, mode] += _time(call, how.get("sync", lambda: None), budget_s / _ROUNDS,
                                             3000 // _ROUNDS, prepare=how.get("prepare"))
    rows = []
    for name in cases:
        dispatch, idle, complete = (_percentiles(samples[name, mode]) for mode in modes)
        rows.append({"method": name, "bytes": n * 4, "p50_us": dispatch[0] * 1e6, "p90_us": dispatch[1] * 1e6,
                     "idle_p50_us": idle[0] * 1e6, "complete_p50_us": complete[0] * 1e6, "program": True})
        print(f"  {name:46s} back to back p50 {_fmt_us(dispatch[0])}  p90 {_fmt_us(dispatch[1])}   "
              f"idle GPU p50 {_fmt_us(idle[0])}   complete p50 {_fmt_us(complete[0])}", flush=True)
    bare, call_row = rows[0], rows[1]
    print(f"  cuxla.torch.call / bare execute = {call_row['p50_us'] / bare['p50_us']:.2f}x back to back, "
          f"{call_row['idle_p50_us'] / bare['idle_p50_us']:.2f}x from an idle GPU "
          + ("(target <= 1.2x)" if device == "cuda" else "(GPU target <= 1.2x: n/a on cpu)"))
    return rows


def _pyplot():
    """matplotlib's pyplot, drawing to files only."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(out_dir: pathlib.Path, stem: str, card: str, rows: list[dict], table: list[str], fig) -> None:
    """A benchmark's results as `stem`.json (the rows), .md (the table) and .png (the figure)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{stem}.json").write_text(json.dumps({"device": card, "rows": rows}, indent=1))
    (out_dir / f"{stem}.md").write_text("\n".join(table) + "\n")
    fig.tight_layout()
    fig.savefig(out_dir / f"{stem}.png", dpi=120)
    print(f"\nwrote {out_dir / stem}.md, .json and .png")


def _write(rows: list[dict], sizes: list[int], card: str, cuda: bool, out_dir: pathlib.Path) -> None:
    """The handoff table and plot; the handoff target (5 µs per call) is a GPU's."""
    handoffs = [r for r in rows if not r.get("program")]
    methods = list(dict.fromkeys(r["method"] for r in handoffs))
    lines = [f"Handoff p50 / p90, µs per call, on {card}", "",
             "| method | " + " | ".join(_size_name(s) for s in sizes) + " |",
             "|---|" + "---|" * len(sizes)]
    for m in methods:
        cells = {r["bytes"]: r for r in handoffs if r["method"] == m}
        lines.append(f"| {m} | " + " | ".join(
            f"{cells[s]['p50_us']:.1f} / {cells[s]['p90_us']:.1f}" for s in sizes) + " |")
    lines += ["", "| torch -> program -> torch (1 MiB) | back to back p50 µs | p90 µs | idle GPU p50 µs | "
                  "to completion p50 µs |",
              "|---|---|---|---|---|"]
    for r in rows:
        if r.get("program"):
            lines.append(f"| {r['method']} | {r['p50_us']:.1f} | {r['p90_us']:.1f} | {r['idle_p50_us']:.1f} | "
                         f"{r['complete_p50_us']:.1f} |")
    fig, ax = _pyplot().subplots(figsize=(9, 5.5))
    for m in methods:
        points = sorted((r["bytes"], r["p50_us"]) for r in handoffs if r["method"] == m)
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=m)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tensor size (bytes)")
    ax.set_ylabel("p50 per call (µs)")
    if cuda:
        ax.axhline(5.0, color="grey", linestyle=":", label="5 µs target")
    ax.set_title(f"PyTorch <-> XLA handoff, {card}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    _save(out_dir, "handoff", card, rows, lines, fig)


def main(args) -> int:
    if args.what == "models":
        from . import _zoo

        names = args.models.split(",") if args.models else _zoo.CI_SUBSET if args.subset == "ci" else list(_zoo.MODELS)
        return models(names, args.steps or 3, args.jobs, args.timeout, args.out, args.dropout, args.tolerance)
    workloads, steps = (args.models or "mlp,cnn,bert").split(","), args.steps or 20
    if args.what == "train":
        return train(workloads, args.backends.split(","), steps, args.out)
    if args.what == "scale":
        return scale(workloads, steps, args.out)
    return handoff(args.max_bytes, args.out, args.budget)


def scale(models: list[str], steps: int, out_dir: str) -> int:
    """Step time of DataParallel SGD over 1, 2, 4... devices (every GPU, or
    the CPU plugin's 4 devices), the global batch fixed: strong scaling."""
    import copy

    import torch

    from . import _models
    from .parallel import DataParallel

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
    lines = [f"Data-parallel SGD step on {card}, global batch fixed", "",
             "| model | devices | step (ms, p50) | speed-up | compile + first step (s) |", "|---|---|---|---|---|"]
    for r in rows:
        one = next(o for o in rows if o["model"] == r["model"] and o["devices"] == 1)
        lines.append(f"| {r['model']} | {r['devices']} | {r['step_ms']:.2f} | {one['step_ms'] / r['step_ms']:.2f}x | "
                     f"{r['compile_s']:.2f} |")
    fig, ax = _pyplot().subplots(figsize=(6, 4.5))
    for name in dict.fromkeys(r["model"] for r in rows):
        points = [(r["devices"], r["step_ms"]) for r in rows if r["model"] == name]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("devices")
    ax.set_ylabel("step time, p50 (ms)")
    ax.set_title(f"Data-parallel SGD, {card}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    _save(pathlib.Path(out_dir), "scale", card, rows, lines, fig)
    return 0


def train(models: list[str], backends: list[str], steps: int, out_dir: str) -> int:
    """Step time and compile time of eager, inductor and cuxla training."""
    import copy

    import torch

    from . import _models

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
    _write_train(rows, card, pathlib.Path(out_dir))
    return 0


def _xla_peak_gib() -> float:
    stats = cuxla._client.client_for_platform("cuda").memory_stats() or {}
    return (stats.get("peak_bytes_in_use") or 0) / 2**30


def _write_train(rows: list[dict], card: str, out_dir: pathlib.Path) -> None:
    lines = [f"Training step and compile time on {card}", "",
             "| model | backend | step (ms, p50) | compile (s) | final loss | peak torch memory (GiB) | XLA peak so far (GiB) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        peak = "-" if r["peak_torch_gib"] is None else f"{r['peak_torch_gib']:.2f}"
        xla = "-" if r["peak_xla_gib"] is None else f"{r['peak_xla_gib']:.2f}"
        lines.append(f"| {r['model']} | {r['backend']} | {r['step_ms']:.2f} | {r['compile_s']:.2f} | "
                     f"{r['final_loss']:.4f} | {peak} | {xla} |")
    models = list(dict.fromkeys(r["model"] for r in rows))
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    fig, (ax_step, ax_compile) = _pyplot().subplots(1, 2, figsize=(11, 4.5))
    width = 0.8 / len(backends)
    for i, backend in enumerate(backends):
        xs = [m + i * width for m in range(len(models))]
        by_model = {r["model"]: r for r in rows if r["backend"] == backend}
        ax_step.bar(xs, [by_model[m]["step_ms"] for m in models], width, label=backend)
        ax_compile.bar(xs, [by_model[m]["compile_s"] for m in models], width, label=backend)
    for ax, title in ((ax_step, "step time (ms, p50)"), (ax_compile, "compile time (s)")):
        ax.set_xticks([m + width * (len(backends) - 1) / 2 for m in range(len(models))], models)
        ax.set_title(title)
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    fig.suptitle(f"Training with torch.compile backends, {card}")
    _save(out_dir, "train", card, rows, lines, fig)


VERDICT_COLOURS = {"pass": "tab:green", "wrong result": "tab:orange", "error": "tab:red",
                   "eager failed": "tab:purple", "timeout": "tab:brown", "crashed": "black",
                   "not in transformers": "lightgrey"}


def models(names: list[str], steps: int = 3, jobs: int = 1, timeout_s: float = 600, out_dir: str = "bench-results",
           dropout: str = "zero", tolerance: float = 1e-4) -> int:
    """The model zoo, eager against cuxla, each model in a child process
    (`python -m cuxla._zoo run`), `jobs` at a time."""
    import concurrent.futures

    # The children share the cores rather than each taking all of them.
    threads = str(max(1, (os.cpu_count() or 1) // jobs))
    command = ["--steps", str(steps), "--dropout", dropout, "--tolerance", str(tolerance)]
    print(f"cuxla bench models: {len(names)} models, {steps} AdamW steps each, eager vs cuxla, "
          f"{jobs} at a time, {timeout_s:g} s each at most", flush=True)
    started = time.perf_counter()
    rows: dict[str, dict] = {}
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(_run_child, name, command, timeout_s, threads): name for name in names}
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            row = rows[futures[future]] = future.result()
            print(f"[{done:2d}/{len(names)}] {row['model']:40s} {row['verdict']:19s} {row['wall_s']:6.1f} s  "
                  f"{row['detail']}", flush=True)
    ordered = [rows[name] for name in names]
    print(f"{len(names)} models in {time.perf_counter() - started:.0f} s")
    _write_models(ordered, steps, dropout, tolerance, pathlib.Path(out_dir))
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


def _last_json_line(out: str) -> dict | None:
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def _cell(value, form: str) -> str:
    return "-" if value is None else format(value, form)


def _top_fallbacks(row: dict) -> str:
    return ", ".join(f"{f['op'].removeprefix('aten.')} ×{f['count']}" for f in (row.get("fallbacks") or [])[:3])


def _write_models(rows: list[dict], steps: int, dropout: str, tolerance: float, out_dir: pathlib.Path) -> None:
    from . import _zoo

    card = next((r["device_name"] for r in rows if r.get("device_name")), "?")
    cuda = any(r.get("peak_mib_cuxla") is not None for r in rows)
    passed = sum(r["verdict"] == "pass" for r in rows)
    one_program = sum(bool(r.get("graphs")) and r.get("xla_programs") == r.get("graphs") for r in rows)
    most_in_xla = sum((r.get("xla_op_share") or 0) >= 0.98 for r in rows)
    verdicts = ", ".join(f"{v} {n}" for v, n in collections.Counter(r["verdict"] for r in rows).most_common())
    summary = (f"**{passed} of {len(rows)} pass**; {one_program} with one XLA program per graph; "
               f"{most_in_xla} with >= 98% of ATen ops in XLA ({verdicts})")
    rule = (f"Pass: losses at every step as close to eager's as eager's own under another seed, twice over, "
            f"and at least within {100 * _zoo.DROPOUT_TRACKING:g}% (XLA draws its own dropout masks: the runs "
            f"track each other; parameters are shown, not judged)."
            if dropout == "default" else
            f"Pass: losses at every step and parameters after the last within {tolerance:g} relative of "
            f"eager's; or, where float32 eager is itself further than that from a float64 eager run, at most "
            f"{_zoo.FLOAT32_SLACK:g}x as far from it as float32 eager. Parameters: max|a - b| over the model's "
            f"largest |a|, tensors whose gradient is rounding noise in both runs left out.")
    lines = [f"Model zoo on {card}: {steps} AdamW steps (lr 1e-3), eager vs torch.compile(backend=\"cuxla\"), "
             f"batch 2 x 16, small configs, random weights, dropout {dropout}. {rule} "
             f"Compile: first cuxla step minus the median later step.",
             "", summary, "",
             "| model | verdict | XLA programs / graph | ATen ops in XLA | compile (s) | step eager (ms) | "
             "step cuxla (ms) |" + (" peak torch / XLA (MiB) |" if cuda else "") + " top fallbacks | detail |",
             "|---|---|---|---|---|---|---|" + ("---|" if cuda else "") + "---|---|"]
    for r in rows:
        share = r.get("xla_op_share")
        ops = "-" if share is None else f"{100 * share:.1f}% ({r['xla_ops']}/{r['aten_ops']})"
        peak = f" {_cell(r.get('peak_mib_cuxla'), '.0f')} / {_cell(r.get('peak_mib_xla'), '.0f')} |" if cuda else ""
        detail = r["detail"].replace("|", "\\|")
        lines.append(f"| {r['model']} | {r['verdict']} | {_cell(r.get('programs_per_graph'), '.2g')} | {ops} | "
                     f"{_cell(r.get('compile_s'), '.1f')} | {_cell(r.get('step_ms_eager'), '.1f')} | "
                     f"{_cell(r.get('step_ms_cuxla'), '.1f')} |{peak} {_top_fallbacks(r)} | {detail} |")
    print("\n" + summary)

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 1.5 + 0.24 * len(rows)))
    ys = range(len(rows))[::-1]  # the first model on top
    shares = [100 * (r.get("xla_op_share") or 0) for r in rows]
    ax.barh(ys, shares, color=[VERDICT_COLOURS.get(r["verdict"], "grey") for r in rows])
    for y, r in zip(ys, rows):
        if r.get("xla_op_share") is None:
            ax.text(1, y, "n/a", va="center", fontsize=7)
    ax.set_yticks(list(ys), [r["model"] for r in rows], fontsize=7)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.axvline(98, color="grey", linestyle=":")
    ax.set_xlim(0, 100)
    ax.set_xlabel("ATen ops of the compiled graphs that run in XLA (%)")
    ax.set_title(f"Model zoo, eager vs cuxla, {card}: {passed} of {len(rows)} pass", fontsize=10)
    seen = dict.fromkeys(r["verdict"] for r in rows)
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=VERDICT_COLOURS.get(v, "grey")) for v in seen],
              labels=list(seen), fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    _save(out_dir, "models", card, rows, lines, fig)
