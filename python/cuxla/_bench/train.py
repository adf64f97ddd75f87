"""`python -m cuxla bench train`: training under eager PyTorch and
torch.compile backends (inductor, cuxla) side by side — step time, tokens/s,
peak memory of PyTorch and XLA together, cold and warm compile, and how much
of each step ran in XLA.

Each (model, backend) trains in a process of its own (`train_child`): its
compile is cold, its peak memory its own. The processes live together and
take turns over the rounds, so a drift of the machine weighs on every backend
alike. A second process per compiled backend then measures the warm compile,
from the caches the first left (inductor's, cuxla's), in a folder of the run's
and the row's own so that the first compile is cold."""
from __future__ import annotations

import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

from . import writers


HOST_TIMED_STEPS = 8  # after the timed rounds: where a step's host time goes, phase by phase
PROFILED_STEPS = 3  # on a GPU, after the timed rounds: where a step's device time goes (step_profile)


class _Child:
    """One backend's training process: its first step (the compile) is timed
    as it starts; `run` times more steps; `report` gives its memory and what
    ran in XLA."""

    def __init__(self, model: str, backend: str, size: str, precision: str, env: dict):
        self.size = size
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cuxla._bench.train_child", model, backend, size, precision],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.started = self._answer()
        self.last_loss = self.started["loss"]

    def ask(self, command: str) -> dict:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        self.process.stdin.write("exit\n")
        self.process.stdin.close()
        self.process.wait()

    def _answer(self) -> dict:
        for line in self.process.stdout:
            if line.startswith("{"):
                return json.loads(line)
        raise RuntimeError(f"the training process ({' '.join(self.process.args[3:])}) ended with exit code "
                           f"{self.process.wait()} (its error is above)")


def train(models: list[str], backends: dict[str, tuple[str, dict[str, str]]], rounds: int, steps: int,
          out_dir: str, tf32: bool = False, size: str | None = None) -> int:
    """`backends`: each row's label -> its backend and environment variables (`split_backends`)."""
    import torch

    cuda = torch.cuda.is_available()
    size = size or ("base" if cuda else "tiny")
    card = torch.cuda.get_device_name() if cuda else "CPU"
    one_pool = cuda and os.environ.get("CUXLA_ONE_POOL") == "1"  # the children's setting (train_child)
    print(f"cuxla bench train on {card}: {size} models, {rounds} rounds of {steps} AdamW steps per backend, "
          f"backends taking turns, TF32 {'on' if tf32 else 'off'} for all{writers.ONE_POOL_SAID if one_pool else ''}",
          flush=True)
    precision = "tf32" if tf32 else "float32"
    rows = []
    with tempfile.TemporaryDirectory(prefix="cuxla-bench-train-") as caches:
        # Compile caches of this run only, and of each backend row its own
        # (rows differing only in a setting would compile the same programs):
        # each row's first process compiles cold.
        envs = {backend: {**os.environ, "CUXLA_CACHE_DIR": f"{caches}/{i}/cuxla",
                          "TORCHINDUCTOR_CACHE_DIR": f"{caches}/{i}/inductor",
                          "TRITON_CACHE_DIR": f"{caches}/{i}/triton", **settings}
                for i, (backend, (_, settings)) in enumerate(backends.items())}
        for model in models:
            children = {}
            for backend, (name, _) in backends.items():  # one at a time: compiles do not overlap
                print(f"  {model} {backend}: first step (compile)", flush=True)
                children[backend] = _Child(model, name, size, precision, envs[backend])
            times: dict[str, list[float]] = {b: [] for b in backends}
            labels = list(backends)
            for r in range(rounds):
                for backend in labels[r % len(labels):] + labels[:r % len(labels)]:
                    answer = children[backend].ask(f"run {steps}")
                    times[backend] += answer["step_s"]
                    children[backend].last_loss = answer["loss"]
                print(f"  {model}: round {r + 1}/{rounds} done", flush=True)
            for backend, child in children.items():
                report = child.ask("report")
                phases = child.ask("phases")
                host = child.ask(f"host {HOST_TIMED_STEPS}")
                profile = child.ask(f"profile {PROFILED_STEPS}")
                child.close()
                step_s = statistics.median(times[backend])
                warm = warm_report = None
                name, _ = backends[backend]
                if name != "eager":  # a second process, from the caches the first left
                    warm = _Child(model, name, size, precision, envs[backend])
                    warm.ask(f"run {steps}")
                    warm_report = warm.ask("report")
                    warm.close()
                rows.append({**_row(model, backend, child, report, step_s, warm, warm_report),
                             "peak_gib_by_phase": phases or None, "host_ms_by_phase": host,
                             "profile": profile or None})
                _print_row(rows[-1])
                # The files after each row: a run cut short leaves what it measured.
                writers.write_train(rows, card, rounds, steps, tf32, one_pool, pathlib.Path(out_dir), quiet=True)
    writers.write_train(rows, card, rounds, steps, tf32, one_pool, pathlib.Path(out_dir))
    return 0


def split_backends(text: str) -> dict[str, tuple[str, dict[str, str]]]:
    """`eager,cuxla,cuxla[CUXLA_COMMAND_BUFFERS=1,CUXLA_AUTOTUNE_LEVEL=0]`:
    each row's label -> its backend and environment variables."""
    return {label: backend_and_environment(label) for label in re.split(r",(?![^\[]*\])", text)}  # commas outside []


def backend_and_environment(label: str) -> tuple[str, dict[str, str]]:
    """`cuxla[NAME=VALUE,...]`: the backend cuxla, its processes run with
    those environment variables (a row of its own beside plain cuxla's)."""
    found = re.fullmatch(r"([\w.:-]+)(?:\[(\w+=[^,\]]*(?:,\w+=[^,\]]*)*)\])?", label)
    if found is None:
        raise ValueError(f"--backends: {label!r} is not BACKEND or BACKEND[NAME=VALUE,...]")
    name, settings = found.groups()
    return name, dict(setting.split("=", 1) for setting in settings.split(",")) if settings else {}


def _peak_gib(report: dict | None) -> float | None:
    """PyTorch's and XLA's peaks added, or with one pool its peak (None on
    the CPU, or without a process)."""
    if report is None or report["peak_torch_gib"] is None:
        return None
    if report.get("peak_pool_gib") is not None:
        return report["peak_pool_gib"]
    return report["peak_torch_gib"] + report["peak_xla_gib"]


def _row(model: str, backend: str, child: _Child, report: dict, step_s: float, warm: _Child | None,
         warm_report: dict | None) -> dict:
    tokens = child.started["tokens"]
    peak = report["peak_torch_gib"]
    return {"model": model, "size": child.size, "backend": backend, "step_ms": step_s * 1e3,
            "tokens_per_s": tokens / step_s if tokens else None,
            "cold_compile_s": max(child.started["first_step_s"] - step_s, 0.0),
            "warm_compile_s": None if warm is None else max(warm.started["first_step_s"] - step_s, 0.0),
            # Of the warm compile, AOTAutograd's (tracing, partitioning) and cuxla's (loading lowerings and
            # executables); the rest is Dynamo's.
            "warm_aot_autograd_s": None if warm is None else warm.started.get("aot_autograd_s"),
            "warm_cuxla_s": None if warm is None else warm.started.get("cuxla_compile_s"),
            # The one-time imports made before either clock, not booked in a compile.
            "imports_s": child.started.get("imports_s"),
            "warm_imports_s": None if warm is None else warm.started.get("imports_s"),
            # Of the warm process's graphs, how many AOTAutograd's cache gave (the others were traced again).
            "warm_graphs_from_cache": None if warm is None else warm.started.get("graphs_from_aot_autograd_cache"),
            # Of the cold process's graphs, how many a cache gave: none, for a compile that is cold.
            "cold_graphs_from_cache": child.started.get("graphs_from_aot_autograd_cache"),
            # Of the cold compile, cuxla's: lowering to StableHLO, and XLA compiling it.
            "lowering_s": report["lowering_s"], "xla_compile_s": report["xla_compile_s"],
            "peak_gib": _peak_gib(report), "peak_torch_gib": peak, "peak_xla_gib": report["peak_xla_gib"],
            # The warm process's: its programs loaded, not compiled (XLA's autotuning allocates as it compiles).
            "warm_peak_gib": _peak_gib(warm_report),
            # Of XLA's peak, the plan of the program that needs the most: arguments, outputs, scratch.
            "largest_xla_program_gib": report["largest_xla_program_gib"],
            "xla_op_share": report["xla_ops"] / report["aten_ops"] if report.get("aten_ops") else None,
            "xla_programs": report["xla_programs"], "graphs": report["graphs"],
            "graph_breaks": report["graph_breaks"], "xla_calls_per_step": report["xla_calls_per_step"],
            "host_ms_in_xla_calls_per_step": report["host_ms_in_xla_calls_per_step"],
            "device_ms_in_xla_per_step": report["device_ms_in_xla_per_step"],
            "first_loss": child.started["loss"],
            "final_loss": child.last_loss}


def _print_row(r: dict) -> None:
    line = f"  {r['model']:6s} {r['backend']:9s} step {r['step_ms']:9.2f} ms   compile cold {r['cold_compile_s']:7.2f} s"
    if r["lowering_s"] is not None:
        line += f" (lowering {r['lowering_s']:.2f}, XLA {r['xla_compile_s']:.2f})"
    if r["warm_compile_s"] is not None:
        line += f", warm {r['warm_compile_s']:6.2f} s"
        if r["warm_cuxla_s"] is not None:
            line += (f" (AOTAutograd {r['warm_aot_autograd_s']:.2f}, cuxla's {r['warm_cuxla_s']:.2f}; "
                     "{} of {} graphs from AOTAutograd's cache)".format(*r["warm_graphs_from_cache"]))
    if r["tokens_per_s"]:
        line += f"   {r['tokens_per_s']:,.0f} tokens/s"
    if r["peak_gib"] is not None:
        line += f"   peak {r['peak_gib']:.2f} GiB (XLA {r['peak_xla_gib']:.2f}"
        line += ")" if r["warm_peak_gib"] is None else f"; warm process {r['warm_peak_gib']:.2f})"
    if r["largest_xla_program_gib"] is not None:
        line += "   XLA's largest program: arguments {:.2f}, outputs {:.2f}, scratch {:.2f} GiB".format(
            *r["largest_xla_program_gib"])
    if r["xla_op_share"] is not None:
        line += (f"   in XLA {100 * r['xla_op_share']:.0f}% of ATen ops, {r['xla_calls_per_step']:.0f} calls a step "
                 f"taking the host {r['host_ms_in_xla_calls_per_step']:.2f} ms")
        if r["device_ms_in_xla_per_step"] is not None:
            line += f" and the device {r['device_ms_in_xla_per_step']:.2f} ms"
    print(line + f"   loss {r['first_loss']:.4f} -> {r['final_loss']:.4f}", flush=True)
    if r.get("peak_gib_by_phase"):
        print(f"  {'':6s} {'':9s} peak by phase: " +
              ", ".join(f"{phase} {gib:.2f} GiB" for phase, gib in r["peak_gib_by_phase"].items()), flush=True)
    if r.get("host_ms_by_phase"):
        print(f"  {'':6s} {'':9s} host by phase: " +
              ", ".join(f"{phase} {ms:.2f}" for phase, ms in r["host_ms_by_phase"].items()) + " ms", flush=True)
    if r.get("profile"):
        print(f"  {'':6s} {'':9s} {writers.step_profile_said(r['profile'], r['step_ms'])}", flush=True)
