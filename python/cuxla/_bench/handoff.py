"""`python -m cuxla bench handoff`: PyTorch <-> XLA handoffs side by side, and
torch -> XLA program -> torch.

Every handoff is timed on the host per call (p50, p90), which is its whole
cost: a zero-copy handoff enqueues no device work beyond an event. The copy
baselines (a device clone, a host round trip) are timed to completion, since
their cost is the copy. One run measures every method at every size, prints
the table as it goes, and writes a table (Markdown, JSON) and a plot (PNG).
"""
from __future__ import annotations

import os
import pathlib
import statistics
import time
from typing import Callable

import cuxla

from . import writers

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
        jax.devices("gpu" if cuda else "cpu")[0]
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
        # A GPU sleep queued on PyTorch's stream before each import, so that
        # XLA must be ordered after it on the device.
        return (lambda: cuxla.from_dlpack(t)), sync, (lambda: torch.cuda._sleep(20_000))

    def cuxla_export(t):
        a = cuxla.from_dlpack(t)
        return (lambda: ct.to_torch(a)), nothing

    methods["cuxla import (torch -> XLA)"] = cuxla_import
    if cuda:
        methods["cuxla import, torch stream busy"] = cuxla_import_busy
        stream, why_not = client._compute_stream(client.devices()[0])
        print("  busy imports: XLA's compute stream waits for PyTorch's" if stream else
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
    header = f"{'method':34s}" + "".join(f"{writers.size_name(s):>22s}" for s in sizes)
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
    writers.write_handoff(rows, sizes, card, cuda, pathlib.Path(out_dir))
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


ADD_ONE = """
func.func public @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %one = stablehlo.constant dense<1.0> : tensor<{n}xf32>
  %0 = stablehlo.add %x, %one : tensor<{n}xf32>
  return %0 : tensor<{n}xf32>
}}
"""


_ROUNDS = 5

# A model's call: BERT-base hands XLA 199 weights and gets 199 gradients back.
MODEL_TENSORS = 200


def _add_one_to_each(count: int, n: int) -> str:
    """A program of `count` float32[n] parameters, each returned plus one."""
    t = f"tensor<{n}xf32>"
    params = ", ".join(f"%x{i}: {t}" for i in range(count))
    adds = "\n".join(f"  %r{i} = stablehlo.add %x{i}, %one : {t}" for i in range(count))
    return (f"func.func public @main({params}) -> ({', '.join([t] * count)}) {{\n"
            f"  %one = stablehlo.constant dense<1.0> : {t}\n{adds}\n"
            f"  return {', '.join(f'%r{i}' for i in range(count))} : {', '.join([t] * count)}\n}}\n")


def _program_overhead(client, ct, torch, device, sync, jax, budget_s) -> list[dict]:
    """torch -> XLA program -> torch: cuxla.torch.call against the bare execute
    on imported Arrays, and the same through JAX; for one tensor, and for a
    model's count of them."""
    n = 1 << 18  # 1 MiB of float32
    t = torch.ones(n, device=device)
    exe = cuxla.compile(ADD_ONE.format(n=n), client=client)
    a = cuxla.from_dlpack(t)
    cases = {
        "execute on Arrays (bare)": (lambda: exe(a), None),
        "cuxla.torch.call (torch -> torch)": (lambda: ct.call(exe, t), None),
        # Its view of t is kept from call to call; a tensor it has not seen
        # costs a new view (the t.view(n) that makes one is timed too).
        "  cuxla.torch.call, a new tensor object each call": (lambda: ct.call(exe, t.view(n)), None),
        # Where the overhead of a call on new tensors goes: the view, or the export.
        "  part: execute on a fresh import": (lambda: exe(t), None),
        "  part: execute, export the output": (lambda: ct.to_torch(exe(a)[0]), None),
    }
    if jax is not None:
        jitted = jax.jit(lambda x: x + 1.0)
        cases["JAX: from_dlpack -> jit -> torch.from_dlpack"] = (
            lambda: torch.from_dlpack(jitted(jax.dlpack.from_dlpack(t))), None)
    print("\ntorch -> XLA program -> torch; host µs per call: back to back (the GPU still busy with the "
          f"calls before), from an idle GPU, and to completion; the cases take turns in {_ROUNDS} rounds, "
          "so that a drift of the machine's speed weighs on all alike")
    rows = _calls_taking_turns("x + 1, 1 MiB", cases, sync, budget_s)
    bare, call_row = rows[0], rows[1]
    print(f"  cuxla.torch.call / bare execute = {call_row['p50_us'] / bare['p50_us']:.2f}x back to back, "
          f"{call_row['idle_p50_us'] / bare['idle_p50_us']:.2f}x from an idle GPU "
          + ("(target <= 1.2x)" if device == "cuda" else "(GPU target <= 1.2x: n/a on cpu)"))

    # A training step's calls: the weights are the same tensors from step to
    # step (their views kept); a batch is new tensors of PyTorch's (a view
    # each); the activations the forward saved are outputs of XLA's given back
    # (read through XLA's buffers).
    n = 1024
    weights = [torch.ones(n, device=device) for _ in range(MODEL_TENSORS)]
    exe = cuxla.compile(_add_one_to_each(MODEL_TENSORS, n), client=client)
    arrays = [cuxla.from_dlpack(w) for w in weights]
    fresh: dict[str, list] = {}

    def new_tensors() -> None:  # untimed, as the two below: making the tensors is not the call's
        fresh["tensors"] = [w.view(n) for w in weights]

    def new_outputs() -> None:
        fresh["outputs"] = list(ct.call(exe, *weights))

    new_tensors(), new_outputs()  # for the warm-up calls
    cases = {
        "execute on Arrays (bare)": (lambda: exe(*arrays), None),
        "cuxla.torch.call, the same tensors (weights)": (lambda: ct.call(exe, *weights), None),
        "cuxla.torch.call, new tensors (a batch)": (lambda: ct.call(exe, *fresh["tensors"]), new_tensors),
        "cuxla.torch.call, XLA's outputs (saved activations)": (lambda: ct.call(exe, *fresh["outputs"]), new_outputs),
    }
    if jax is not None:
        jitted_all = jax.jit(lambda *xs: [x + 1.0 for x in xs])
        own = [jax.numpy.ones(n, device=jax.devices("gpu" if device == "cuda" else "cpu")[0])
               for _ in range(MODEL_TENSORS)]
        cases["JAX: jit on its own arrays"] = (lambda: jitted_all(*own), None)
    program = f"{MODEL_TENSORS} tensors in, {MODEL_TENSORS} out (4 KiB each)"
    many = _calls_taking_turns(program, cases, sync, budget_s)
    for row in many[1:]:
        print(f"  {row['method']}: {(row['p50_us'] - many[0]['p50_us']) / MODEL_TENSORS:.2f} µs a tensor "
              "over the bare execute, back to back")
    return rows + many


def _calls_taking_turns(program: str, cases: dict, sync, budget_s: float) -> list[dict]:
    """Each case's (call, untimed preparation) timed back to back, from an
    idle device and to completion, the cases taking turns; a row each."""
    print(f"{program}:")
    modes = {"dispatch": (None, None), "idle": (sync, None), "complete": (None, sync)}
    samples = {(name, mode): [] for name in cases for mode in modes}
    for _ in range(_ROUNDS):
        for mode, (idle_first, wait) in modes.items():
            for name, (call, prepare) in cases.items():
                steps = [step for step in (prepare, idle_first) if step is not None]
                samples[name, mode] += _time(call, wait or (lambda: None), budget_s / _ROUNDS, 3000 // _ROUNDS,
                                             prepare=(lambda: [step() for step in steps]) if steps else None)
    rows = []
    for name in cases:
        dispatch, idle, complete = (_percentiles(samples[name, mode]) for mode in modes)
        rows.append({"method": name, "program": program, "p50_us": dispatch[0] * 1e6, "p90_us": dispatch[1] * 1e6,
                     "idle_p50_us": idle[0] * 1e6, "complete_p50_us": complete[0] * 1e6})
        print(f"  {name:46s} back to back p50 {_fmt_us(dispatch[0])}  p90 {_fmt_us(dispatch[1])}   "
              f"idle GPU p50 {_fmt_us(idle[0])}   complete p50 {_fmt_us(complete[0])}", flush=True)
    return rows
