"""What the benchmarks write: each one's table (Markdown), rows (JSON) and
figure (PNG), and the pieces they share."""
from __future__ import annotations

import collections
import json
import pathlib

from .. import _models
from . import step_profile


def pyplot():
    """matplotlib's pyplot, drawing to files only."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(out_dir: pathlib.Path, stem: str, card: str, rows: list[dict], table: list[str], fig,
         quiet: bool = False) -> None:
    """A benchmark's results as `stem`.json (the rows), .md (the table) and .png (the figure)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{stem}.json").write_text(json.dumps({"device": card, "rows": rows}, indent=1))
    (out_dir / f"{stem}.md").write_text("\n".join(table) + "\n")
    fig.tight_layout()
    fig.savefig(out_dir / f"{stem}.png", dpi=120)
    pyplot().close(fig)
    if not quiet:
        print(f"\nwrote {out_dir / stem}.md, .json and .png")


def size_name(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def write_handoff(rows: list[dict], sizes: list[int], card: str, cuda: bool, out_dir: pathlib.Path) -> None:
    """The handoff table and plot; the handoff target (5 µs per call) is a GPU's."""
    handoffs = [r for r in rows if not r.get("program")]
    methods = list(dict.fromkeys(r["method"] for r in handoffs))
    lines = [f"Handoff p50 / p90, µs per call, on {card}", "",
             "| method | " + " | ".join(size_name(s) for s in sizes) + " |",
             "|---|" + "---|" * len(sizes)]
    for m in methods:
        cells = {r["bytes"]: r for r in handoffs if r["method"] == m}
        lines.append(f"| {m} | " + " | ".join(
            f"{cells[s]['p50_us']:.1f} / {cells[s]['p90_us']:.1f}" for s in sizes) + " |")
    for program in dict.fromkeys(r["program"] for r in rows if r.get("program")):
        lines += ["", f"| torch -> program -> torch ({program}) | back to back p50 µs | p90 µs | idle GPU p50 µs | "
                      "to completion p50 µs |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['method']} | {r['p50_us']:.1f} | {r['p90_us']:.1f} | {r['idle_p50_us']:.1f} | "
                  f"{r['complete_p50_us']:.1f} |" for r in rows if r.get("program") == program]
    fig, ax = pyplot().subplots(figsize=(9, 5.5))
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
    save(out_dir, "handoff", card, rows, lines, fig)


def write_scale(rows: list[dict], card: str, out_dir: pathlib.Path) -> None:
    """The scaling table and plot: step time and speed-up per model and device count."""
    lines = [f"Data-parallel SGD step on {card}, global batch fixed", "",
             "| model | devices | step (ms, p50) | speed-up | compile + first step (s) |", "|---|---|---|---|---|"]
    for r in rows:
        one = next(o for o in rows if o["model"] == r["model"] and o["devices"] == 1)
        lines.append(f"| {r['model']} | {r['devices']} | {r['step_ms']:.2f} | {one['step_ms'] / r['step_ms']:.2f}x | "
                     f"{r['compile_s']:.2f} |")
    fig, ax = pyplot().subplots(figsize=(6, 4.5))
    for name in dict.fromkeys(r["model"] for r in rows):
        points = [(r["devices"], r["step_ms"]) for r in rows if r["model"] == name]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("devices")
    ax.set_ylabel("step time, p50 (ms)")
    ax.set_title(f"Data-parallel SGD, {card}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    save(out_dir, "scale", card, rows, lines, fig)


ONE_POOL_SAID = "; PyTorch allocating from XLA's memory pool in every process (CUXLA_ONE_POOL=1)"


def write_train(rows: list[dict], card: str, rounds: int, steps: int, tf32: bool, one_pool: bool,
                out_dir: pathlib.Path, quiet: bool = False) -> None:
    sizes = " and ".join(dict.fromkeys(r["size"] for r in rows))
    lines = [f"Training on {card}, {sizes} models: {rounds} rounds of {steps} AdamW steps per backend, the "
             f"backends taking turns, each in a process of its own; TF32 {'on' if tf32 else 'off'} for all "
             f"(float32 matrix products and convolutions){ONE_POOL_SAID if one_pool else ''}. "
             "Step: median of all timed steps. Compile: the first "
             "step's excess over it, cold (empty caches; for cuxla, lowering + XLA's compiles, summed: forward "
             "and backward compile at once) and warm (a second "
             "process, the first's caches; for cuxla, in brackets, AOTAutograd's part (tracing the forward and "
             "backward, partitioning; or loading them from its cache) and cuxla's own (loading lowerings and "
             "executables), the rest being Dynamo's, and how many of the graphs AOTAutograd's cache gave). Peak: "
             "PyTorch's and XLA's peak allocations, added (for cuxla with two pools an upper bound: the two may "
             "peak at different moments; with one pool, CUXLA_ONE_POOL=1, the pool's peak of the two at once), "
             "in brackets the warm process's over as many steps (programs "
             "loaded, not compiled: XLA's autotuning allocates device memory as it compiles), and the plan of "
             "the XLA program that needs the most: its arguments + outputs + scratch, all in use while it runs "
             "(for training, the backward: what the forward saved, the gradients, the temporaries). XLA calls: "
             "programs "
             "called a step, the host's time "
             "in those calls (handing tensors over, launching; XLA's device work runs on after) and, on a GPU, "
             "their time on the device (CUDA events on PyTorch's stream around each call); the rest of a step "
             "is PyTorch's (the optimizer, ops left to it) and the device waiting for the host.", "",
             "| model | backend | step (ms) | tokens/s | peak memory (GiB) | compile cold (s) | compile warm (s) | "
             "ATen ops in XLA | XLA calls a step, host ms, device ms in them | graph breaks | loss first -> last |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        share = "-" if r["xla_op_share"] is None else f"{100 * r['xla_op_share']:.1f}%"
        split = "" if r["lowering_s"] is None else f" ({r['lowering_s']:.2f} + {r['xla_compile_s']:.2f})"
        warm_split = "" if r["warm_cuxla_s"] is None else \
            " ({:.2f} + {:.2f}; {} of {} graphs cached)".format(r["warm_aot_autograd_s"], r["warm_cuxla_s"],
                                                               *r["warm_graphs_from_cache"])
        peak_detail = "" if r.get("warm_peak_gib") is None else f" ({r['warm_peak_gib']:.2f})"
        if r.get("largest_xla_program_gib") is not None:
            peak_detail += "; largest program {:.2f} + {:.2f} + {:.2f}".format(*r["largest_xla_program_gib"])
        calls = ("-" if r["xla_calls_per_step"] is None
                 else f"{r['xla_calls_per_step']:.0f}, {r['host_ms_in_xla_calls_per_step']:.2f}, "
                      f"{_cell(r['device_ms_in_xla_per_step'], '.2f')}")
        lines.append(f"| {r['model']} | {r['backend']} | {r['step_ms']:.2f} | {_cell(r['tokens_per_s'], ',.0f')} | "
                     f"{_cell(r['peak_gib'], '.2f')}{peak_detail} | {r['cold_compile_s']:.2f}{split} | "
                     f"{_cell(r['warm_compile_s'], '.2f')}{warm_split} | "
                     f"{share} | {calls} | {r['graph_breaks']} | {r['first_loss']:.4f} -> {r['final_loss']:.4f} |")
    imported = [r for r in rows if r.get("imports_s") is not None]
    if imported:
        lines += ["", "One-time imports and set-up (cuxla's client) made before each process's clock, not booked in "
                  "its compile (s, cold process, warm): " + "; ".join(
                      f"{r['model']} {r['backend']} {r['imports_s']:.2f}, {_cell(r['warm_imports_s'], '.2f')}"
                      for r in imported) + "."]
    phased = [r for r in rows if r.get("peak_gib_by_phase")]
    if phased:
        lines += ["", "Where a step's memory peaks: of one step after the timed rounds, each phase's peak of bytes "
                  "in use, GiB (the forward: to the loss; the backward; the optimizer's step), by PyTorch's "
                  "allocator, or with one pool by the pool (both runtimes at once); not split for cuxla beside a "
                  "pool of XLA's own, whose peak cannot be started again per phase.", "",
                  "| model | backend | " + " | ".join(_models.PHASES) + " |", "|---|---|" + "---|" * len(_models.PHASES)]
        lines += [f"| {r['model']} | {r['backend']} | " +
                  " | ".join(f"{r['peak_gib_by_phase'][phase]:.2f}" for phase in _models.PHASES) + " |"
                  for r in phased]
    timed = [r for r in rows if r.get("host_ms_by_phase")]
    if timed:
        phases = list(dict.fromkeys(phase for r in timed for phase in r["host_ms_by_phase"]))
        lines += ["", "Where a step's host time goes: of steps after the timed rounds, each started with the device "
                  "idle, the host's ms in each phase (to the loss; the backward; the optimizer's step; the zeroing "
                  "of the gradients is the forward's), none waiting for the device, then its wait for the device to "
                  "finish the step (medians). A wait near zero: the host set the step's pace, the device waited "
                  "for it.", "",
                  "| model | backend | " + " | ".join(phases) + " |", "|---|---|" + "---|" * len(phases)]
        lines += [f"| {r['model']} | {r['backend']} | " +
                  " | ".join(_cell(r["host_ms_by_phase"].get(phase), ".2f") for phase in phases) + " |"
                  for r in timed]
    profiled = [r for r in rows if r.get("profile")]
    if profiled:
        kinds = [*step_profile.KINDS, step_profile.OTHER]
        lines += ["", "Where a step's device time goes: PyTorch's profiler over a few steps after the timed rounds "
                  "(its CUDA activity: every kernel and copy of the process, XLA's too), per step in ms. Busy: the "
                  "device running anything (streams overlapping counted once); idle: the step's time above less "
                  "busy; waits: of the profiled steps (each waited for, as a timed step is), the gaps from the "
                  "step's start on the host to its last kernel in which the device ran nothing, and in brackets "
                  "the part of them before the host launched the kernel that ends each (the device waiting for "
                  "the host to launch). Kernels by kind from their names (matmul: cuBLAS, CUTLASS, XLA's GEMM "
                  "fusions, inductor's templates; optimizer: PyTorch's multi-tensor loops; other: fusions, "
                  "elementwise, reductions).", "",
                  "| model | backend | step | busy | idle | waits (before launch) | kernels and copies | " +
                  " | ".join(kinds) + " | longest kernels |", "|---|---|---|---|---|---|---|" + "---|" * len(kinds) +
                  "---|"]
        for r in profiled:
            p = r["profile"]
            if "error" in p:
                lines.append(f"| {r['model']} | {r['backend']} | {r['step_ms']:.2f} | profile failed: "
                             f"{p['error'][:80]} |")
                continue
            longest = "; ".join(_longest_kernels(p["longest"]))
            lines.append(f"| {r['model']} | {r['backend']} | {r['step_ms']:.2f} | {p['device_busy_ms']:.2f} | "
                         f"{r['step_ms'] - p['device_busy_ms']:.2f} | {_waits_said(p)} | {p['device_events']:.0f} | " +
                         " | ".join(f"{p['ms_by_kind'][k]:.2f}" for k in kinds) + f" | {longest} |")
        lines += ["", "The longest kernels of each kind, ms a step (names cut at 40 characters):", "",
                  "| model | backend | kind | longest kernels |", "|---|---|---|---|"]
        lines += [f"| {r['model']} | {r['backend']} | {kind} | {'; '.join(_longest_kernels(named))} |"
                  for r in profiled for kind, named in r["profile"].get("longest_by_kind", {}).items()]
        waited = [r for r in profiled if r["profile"].get("longest_waits")]
        if waited:
            lines += ["", "The longest waits of the device, ms a step, by the kernels either side (names cut at 40 "
                      "characters), and how many such gaps a step has:", "",
                      "| model | backend | after | before | ms | gaps |", "|---|---|---|---|---|---|"]
            lines += [f"| {r['model']} | {r['backend']} | {w['after'][:40]} | {w['before'][:40]} | {w['ms']:.2f} | "
                      f"{w['count']:.1f} |" for r in waited for w in r["profile"]["longest_waits"]]
    models = list(dict.fromkeys(r["model"] for r in rows))
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    panels = [("step time (ms)", "step_ms"), ("cold compile (s)", "cold_compile_s")]
    if any(r["peak_gib"] is not None for r in rows):
        panels.append(("peak memory, PyTorch + XLA (GiB)", "peak_gib"))
    fig, axes = pyplot().subplots(1, len(panels), figsize=(5 * len(panels), 4.5))
    width = 0.8 / len(backends)
    for ax, (title, key) in zip(axes, panels):
        for i, backend in enumerate(backends):
            by_model = {r["model"]: r for r in rows if r["backend"] == backend}
            heights = [by_model.get(m, {}).get(key) or 0 for m in models]  # 0 where a run cut short has no row
            ax.bar([m + i * width for m in range(len(models))], heights, width, label=backend)
        ax.set_xticks([m + width * (len(backends) - 1) / 2 for m in range(len(models))], models)
        ax.set_title(title)
        if key == "cold_compile_s":  # eager's is near 0, the compilers' tens of seconds
            ax.set_yscale("log")
        ax.legend(fontsize=8)
    fig.suptitle(f"Training with torch.compile backends, {card}{', TF32' if tf32 else ''}")
    save(out_dir, "train" + ("-tf32" if tf32 else "") + ("-one-pool" if one_pool else ""), card, rows, lines, fig,
         quiet)


def step_profile_said(profile: dict, step_ms: float) -> str:
    """A row's profile in one line, as `bench train` prints it."""
    if "error" in profile:
        return f"profile failed: {profile['error']}"
    kinds = ", ".join(f"{kind} {ms:.2f}" for kind, ms in profile["ms_by_kind"].items())
    longest = ", ".join(_longest_kernels(profile["longest"]))
    said = (f"device busy {profile['device_busy_ms']:.2f} of the step's {step_ms:.2f} ms, "
            f"{profile['device_events']:.0f} kernels and copies: {kinds} ms; longest: {longest}")
    if "idle_ms" in profile:
        waits = "; ".join(f"{w['after'][:40]} -> {w['before'][:40]} {w['ms']:.2f}" for w in profile["longest_waits"])
        said += f"\n{'':19s} device waiting {_waits_said(profile)} ms a step; longest: {waits}"
    return said


def _waits_said(profile: dict) -> str:
    if "idle_ms" not in profile:
        return "-"
    return f"{profile['idle_ms']:.2f} ({profile['idle_before_launch_ms']:.2f})"


def _longest_kernels(kernels: list[dict]) -> list[str]:
    return [f"{k['name'][:40]} {k['ms']:.2f}" for k in kernels]


def _cell(value, form: str) -> str:
    return "-" if value is None else format(value, form)


VERDICT_COLOURS = {"pass": "tab:green", "wrong result": "tab:orange", "error": "tab:red",
                   "eager failed": "tab:purple", "timeout": "tab:brown", "crashed": "black",
                   "not in transformers": "lightgrey"}


def _top_fallbacks(row: dict) -> str:
    return ", ".join(f"{f['op'].removeprefix('aten.')} ×{f['count']}" for f in (row.get("fallbacks") or [])[:3])


def write_models(rows: list[dict], steps: int, dropout: str, tolerance: float, dtype: str,
                 out_dir: pathlib.Path) -> None:
    from .. import _zoo

    card = next((r["device_name"] for r in rows if r.get("device_name")), "?")
    cuda = any(r.get("peak_mib_cuxla") is not None for r in rows)
    passed = sum(r["verdict"] == "pass" for r in rows)
    one_program = sum(bool(r.get("graphs")) and r.get("xla_programs") == r.get("graphs") for r in rows)
    most_in_xla = sum((r.get("xla_op_share") or 0) >= 0.98 for r in rows)
    verdicts = ", ".join(f"{v} {n}" for v, n in collections.Counter(r["verdict"] for r in rows).most_common())
    unbroken = sum(r.get("graph_breaks") == 0 for r in rows)
    # Rows the parent made (a timeout, a crash) say nothing of the child's pool.
    said, pooled = sum("one_pool" in r for r in rows), sum(bool(r.get("one_pool")) for r in rows)
    pool_said = (ONE_POOL_SAID if pooled == said else
                 f"; PyTorch allocating from XLA's memory pool in {pooled} of the {said} processes" if pooled else "")
    without_zeros = sum(bool(r.get("backwards_without_zeros")) for r in rows)
    summary = (f"**{passed} of {len(rows)} pass**; {one_program} with one XLA program per graph; "
               f"{most_in_xla} with >= 98% of ATen ops in XLA; {unbroken} without a graph break; "
               f"{without_zeros} with a backward given no zeros for outputs the loss does not reach ({verdicts})")
    rule = (f"Pass: losses at every step as close to eager's as eager's own under another seed, twice over, "
            f"and at least within {100 * _zoo.DROPOUT_TRACKING:g}% (XLA draws its own dropout masks: the runs "
            f"track each other; parameters are shown, not judged)."
            if dropout == "default" else
            f"Pass: losses at every step and parameters after the last within {tolerance:g} relative of "
            f"eager's; or, where eager is itself further than that from an eager run in "
            f"{_zoo.YARDSTICKS[dtype]}, at most {_zoo.ROUNDING_SLACK:g}x as far from it as eager. Parameters: "
            f"max|a - b| over the model's largest |a|, tensors whose gradient is rounding noise in both runs "
            f"left out. And from eager's state at each step, each step's loss and gradients (max|a - b| over "
            f"the largest gradient) within {tolerance:g} of eager's or {_zoo.ROUNDING_SLACK:g}x eager's own "
            f"distance from {_zoo.YARDSTICKS[dtype]} at its furthest step: runs that part by rounding alone "
            f"but meet this pass step by step; runs that agree fail it only if every step is apart (the batch "
            f"is the same at each: a wrong lowering is wrong at every step, a near tie tips at one).")
    lines = [f"Model zoo on {card}: {steps} AdamW steps (lr 1e-3), eager vs torch.compile(backend=\"cuxla\"), "
             f"batch 2 x 16, small configs, random weights, {dtype}, dropout {dropout}{pool_said}. {rule} "
             f"Compile: first cuxla step minus the median later step that compiled nothing. Graph breaks: "
             f"where Dynamo cut the model's Python (the same under any backend; between graphs PyTorch runs eagerly).",
             "", summary, "",
             "| model | verdict | graph breaks | XLA programs / graph | ATen ops in XLA | compile (s) | step eager (ms) | "
             "step cuxla (ms) |" + (" peak torch / XLA (MiB) |" if cuda else "") + " top fallbacks | detail |",
             "|---|---|---|---|---|---|---|---|" + ("---|" if cuda else "") + "---|---|"]
    for r in rows:
        share = r.get("xla_op_share")
        ops = "-" if share is None else f"{100 * share:.1f}% ({r['xla_ops']}/{r['aten_ops']})"
        peak = f" {_cell(r.get('peak_mib_cuxla'), '.0f')} / {_cell(r.get('peak_mib_xla'), '.0f')} |" if cuda else ""
        detail = r["detail"].replace("|", "\\|")
        lines.append(f"| {r['model']} | {r['verdict']} | {_cell(r.get('graph_breaks'), 'd')} | "
                     f"{_cell(r.get('programs_per_graph'), '.2g')} | {ops} | "
                     f"{_cell(r.get('compile_s'), '.1f')} | {_cell(r.get('step_ms_eager'), '.1f')} | "
                     f"{_cell(r.get('step_ms_cuxla'), '.1f')} |{peak} {_top_fallbacks(r)} | {detail} |")
    print("\n" + summary)

    plt = pyplot()
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
    save(out_dir, "models", card, rows, lines, fig)


def memory_cell(row: dict) -> str:
    """One measurement of `bench memory`, as its table shows it."""
    if "error" in row:
        return f"failed: {row['error'][:80]}"
    if "us_per_op" in row:
        return f"{row['us_per_op']:.2f} µs on the host"
    in_xla = "" if row.get("xla_op_share") is None else f", {100 * row['xla_op_share']:.0f}% of ATen ops in XLA"
    if "batch" in row:
        return f"{row['batch']} (in {row['budget_gib']:.0f} GiB){in_xla}"
    own = "" if row.get("xla_peak_gib") is None else \
        f" (own peaks: PyTorch {row['torch_peak_gib']:.2f}, XLA {row['xla_peak_gib']:.2f})"
    own += "" if row.get("need_gib") is None else f" (in use at once: {row['need_gib']:.2f})"
    programs = row.get("backward_programs") or 1
    in_xla += f", the backward in {programs} programs" if programs > 1 else ""
    return f"{row['peak_gib']:.2f} GiB{own}, step {row['step_ms']:.1f} ms{in_xla}"


def one_pool_bounds(rows: list[dict]) -> list[str]:
    """Per training measure, one pool's peak against the larger of eager's
    peak and XLA's own peak with two pools (the pool's goal: within 5%)."""
    by_key = {(r["measure"], r["setting"]): r for r in rows if "peak_gib" in r}
    lines = []
    for measure in dict.fromkeys(m for m, _ in by_key):
        one, eager, two = (by_key.get((measure, s), {}) for s in ("one_pool", "eager", "two_pools"))
        if "peak_gib" in one and "peak_gib" in eager and two.get("xla_peak_gib") is not None:
            larger = max(eager["peak_gib"], two["xla_peak_gib"])
            lines.append(f"- {measure}: one pool {one['peak_gib']:.2f} GiB against the larger of eager's peak "
                         f"and XLA's own, {larger:.2f} GiB: {100 * (one['peak_gib'] / larger - 1):+.0f}%")
            if one.get("need_gib") and eager.get("need_gib"):
                lines.append(f"  - the compiled steps' bytes in use at once, {one['need_gib']:.2f} GiB "
                             f"({100 * (one['need_gib'] / eager['need_gib'] - 1):+.0f}% over eager's "
                             f"{eager['need_gib']:.2f}); the pool held {one['peak_gib']:.2f}, "
                             f"{100 * (one['peak_gib'] / one['need_gib'] - 1):+.0f}% over them")
    return lines


def write_memory(rows: list[dict], card: str, settings: dict[str, str], out_dir: pathlib.Path,
                 quiet: bool = False) -> None:
    measures = list(dict.fromkeys(r["measure"] for r in rows))
    lines = [f"Memory on {card}: peak device memory in use after each of 5 training steps (the first compiles, "
             "cold), over what was in use before them with the model and its inputs already made "
             "(torch.cuda.mem_get_info: what other processes see taken), and step time; the largest MLP "
             "batch (width 4096) whose training fits 8 GiB, grown by doubling and then by eighths, in one process; "
             "the host's time for an eager op making a new tensor. For cuxla, the share of ATen ops that ran in "
             "XLA (a graph left to PyTorch would make the row an eager one). Each in a process of its own, "
             "without PyTorch's or cuxla's allocator settings from the environment.",
             "", "| measure | " + " | ".join(settings) + " |", "|---|" + "---|" * len(settings)]
    by_key = {(r["measure"], r["setting"]): r for r in rows}
    for measure in measures:
        cells = [memory_cell(by_key[(measure, s)]) if (measure, s) in by_key else "-" for s in settings]
        lines.append(f"| {measure} | " + " | ".join(cells) + " |")
    lines += ["", *[f"- {name}: {what}" for name, what in settings.items()]]
    bounds = one_pool_bounds(rows)
    if bounds:
        lines += ["", "One pool against the larger of eager's peak and XLA's own peak (goal: within +5%):", *bounds]
    if not quiet:
        print("\n".join(lines))
    plt = pyplot()
    peaks = [m for m in measures if any("peak_gib" in by_key.get((m, s), {}) for s in settings)]
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(settings)
    for i, setting in enumerate(settings):
        values = [by_key.get((m, setting), {}).get("peak_gib", 0.0) for m in peaks]
        ax.bar([x + i * width for x in range(len(peaks))], values, width, label=setting)
    ax.set_xticks([x + width for x in range(len(peaks))], peaks, fontsize=8)
    ax.set_ylabel("peak device memory in use (GiB)")
    ax.set_title(f"One pool or two: compiled training on {card}")
    ax.legend()
    save(out_dir, "memory", card, rows, lines, fig, quiet)
