"""The command line: `info`, `demo` and `bench`."""
import importlib
import importlib.metadata
import json
import os
import pathlib
import subprocess
import sys
import sysconfig
import tomllib

import pytest

import cuxla
from cuxla import _cuxla, _demo

ROOT = pathlib.Path(__file__).resolve().parents[2]
# CUDA's driver sees no device under this environment: a run as on a machine without a GPU.
NO_GPU = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}


def _run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "cuxla", *args], capture_output=True, text=True, timeout=600,
                          env=env)


def _console_script() -> pathlib.Path:
    script = pathlib.Path(sysconfig.get_path("scripts")) / "cuxla"
    if not script.exists():
        pytest.skip(f"no cuxla console script at {script}")
    return script


def test_help_names_the_program_as_it_was_run():
    assert _run("--help").stdout.startswith("usage: python -m cuxla ")
    script = subprocess.run([_console_script(), "--help"], capture_output=True, text=True, timeout=60)
    assert script.stdout.startswith("usage: cuxla ")


def test_version_is_the_package_version():
    assert cuxla.__version__ == importlib.metadata.version("cuxla")
    for run in (_run("--version"), subprocess.run([_console_script(), "--version"], capture_output=True,
                                                  text=True, timeout=60)):
        assert run.returncode == 0 and run.stdout == f"cuxla {cuxla.__version__}\n"


def test_demo_without_a_gpu_says_so_in_one_line():
    result = _run("demo", "--platform", "cuda", env=NO_GPU)
    assert result.returncode == 1
    assert result.stderr.startswith("cuxla: no GPU (") and result.stderr.count("\n") == 1, result.stderr


def test_cuxla_errors_are_one_line_and_a_traceback_with_debug(tmp_path):
    plugin = tmp_path / "not_a_plugin.so"
    plugin.write_text("not a shared library")
    env = {**os.environ, "CUXLA_PJRT_PLUGIN": str(plugin)}
    result = _run("demo", "--platform", "cpu", env=env)
    assert result.returncode == 1
    assert result.stderr.startswith(f"cuxla: cannot load PJRT plugin {plugin}: ") and result.stderr.count("\n") == 1
    debug = _run("--debug", "demo", "--platform", "cpu", env=env)
    assert debug.returncode == 1
    assert "Traceback" in debug.stderr and f"ValueError: cannot load PJRT plugin {plugin}: " in debug.stderr


def test_info_reports_plugins_versions_and_devices(client):
    result = _run("info")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "built against PJRT C API 0." in out
    assert f"[{client.platform}]" in out and client.plugin in out
    assert "PJRT C API 0." in out and "device 0:" in out
    assert "CUDA driver:" in out
    assert f"XLA_FLAGS: {os.environ.get('XLA_FLAGS') or '(none)'}" in out  # what XLA reads, as cuxla left it


def test_info_says_which_attention_compiled_cuda_graphs_run():
    from jax._src.lib import cuda_versions

    def said(setting: str | None) -> list[str]:
        env = {k: v for k, v in os.environ.items() if k != "CUXLA_ATTENTION"}
        out = _run("info", env={**env, "CUXLA_ATTENTION": setting} if setting is not None else env).stdout
        return [line.split(": ", 1)[1] for line in out.splitlines() if "torch.compile's attention on CUDA" in line]

    assert said("xla") == ["XLA's own ops (CUXLA_ATTENTION=xla; cuDNN's flash attention unless so set)"]
    (cudnn,) = said("cudnn")
    assert cudnn.startswith("cuDNN's flash attention (cuDNN ") if cuda_versions else \
        cudnn.endswith("JAX's CUDA plugin libraries are not installed: XLA's own ops")
    assert said(None) == [cudnn]
    assert said("flash") == ["CUXLA_ATTENTION='flash' is not one of xla, cudnn"]


def test_info_says_how_many_programs_compiled_graphs_run_as():
    def said(**settings: str) -> list[str]:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_PROGRAMS")}
        out = _run("info", env={**env, **settings}).stdout
        return [line.split(": ", 1)[1] for line in out.splitlines() if "torch.compile's graphs" in line]

    assert said() == ["a forward as 1, a backward as 1 XLA program(s) (CUXLA_FORWARD_PROGRAMS, CUXLA_BACKWARD_PROGRAMS)"]
    assert said(CUXLA_FORWARD_PROGRAMS="3", CUXLA_BACKWARD_PROGRAMS="4")[0].startswith("a forward as 3, a backward as 4 ")
    assert said(CUXLA_BACKWARD_PROGRAMS="four") == [
        "CUXLA_BACKWARD_PROGRAMS='four' is not a whole number of programs, 1 or more"]


def test_info_says_why_a_platform_is_missing(client):
    result = _run("info")
    for platform in ("cuda", "cpu"):
        assert f"[{platform}]" in result.stdout
    assert "looked at" in result.stdout


def test_info_names_the_package_of_a_missing_cuda_plugin():
    out = _run("info").stdout
    if _cuxla.find_plugin("cuda", [p for p in sys.path if p])[0] is not None:
        assert "-> no cuda plugin" not in out
        return
    # The command installs the project's pin of the plugin, as its `cuda` extra names it.
    (extra,) = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["cuda"]
    assert f"-> no cuda plugin: jax-cuda13-pjrt not found (pip install '{extra}')\n" in out, out


def test_demo_runs_and_checks_its_result(client):
    result = _run("demo", "--platform", client.platform)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "-> OK" in result.stdout and "compile" in result.stdout
    assert f"host -> device (3 {'views' if client.platform == 'cpu' else 'copies'})" in result.stdout


def test_demo_hands_the_cpu_views_of_its_numpy_arrays(device):
    if device.platform != "cpu":
        pytest.skip("a GPU gets copies of host memory")
    values = _demo.inputs(device)
    arrays = _demo.upload(values, device)
    for v, a in zip(values, arrays):
        assert v.ctypes.data % 64 == 0
        assert a.is_view and a.unsafe_buffer_pointer() == v.ctypes.data
    values[2][0] = 42.0
    assert arrays[2].numpy()[0] == 42.0


def test_bench_commands_write_a_table_json_and_a_plot(tmp_path):
    # Small settings: the numbers are the GPU runs' business, the files are checked here.
    runs = {
        "handoff": ["--max-bytes", "4096", "--budget", "0.02"],
        "train": ["--models", "mlp,gpt2", "--backends", "eager,cuxla", "--rounds", "2", "--steps", "2",
                  "--size", "tiny"],
        "scale": ["--models", "mlp", "--steps", "2"],
    }
    for what, options in runs.items():
        result = _run("bench", what, "--out", str(tmp_path), *options)
        assert result.returncode == 0, result.stdout + result.stderr
        table = (tmp_path / f"{what}.md").read_text()
        assert (tmp_path / f"{what}.png").stat().st_size > 1000
        rows = json.loads((tmp_path / f"{what}.json").read_text())["rows"]
        assert rows and all(r.get("step_ms", r.get("p50_us", 0)) > 0 for r in rows)
        assert all(str(r.get("method", r.get("model"))) in table for r in rows)
        if what == "train":  # the compiled backend's warm second process, tokens and XLA's share ran
            cuxla_rows = [r for r in rows if r["backend"] == "cuxla"]
            assert cuxla_rows and all(r["warm_compile_s"] is not None and r["warm_cuxla_s"] is not None
                                      and 0 < r["warm_aot_autograd_s"] < r["warm_compile_s"]
                                      and r["warm_graphs_from_cache"][0] == r["warm_graphs_from_cache"][1] > 0
                                      and r["xla_op_share"] == 1.0
                                      and r["xla_calls_per_step"] >= 1 and r["lowering_s"] > 0
                                      and r["imports_s"] > 0 and r["warm_imports_s"] > 0
                                      and list(r["host_ms_by_phase"]) == ["forward", "backward", "optimizer",
                                                                          "waiting for the device"]
                                      and (r["warm_peak_gib"] is None) == (r["peak_gib"] is None)
                                      and all(size > 0 for size in r["largest_xla_program_gib"]) for r in cuxla_rows)
            assert [r["tokens_per_s"] > 0 for r in rows if r["model"] == "gpt2"] == [True, True]
    # TF32 for every backend: its own files, saying so. A backend with its
    # own environment is a row of its own: here Dynamo is off in its process;
    # another compiles what cuxla's row does, cold all the same (its own caches).
    variant, same = "cuxla[TORCHDYNAMO_DISABLE=1,CUXLA_LOG=error]", "cuxla[CUXLA_LOG=error]"
    result = _run("bench", "train", "--tf32", "--models", "mlp", "--backends", f"eager,cuxla,{variant},{same}",
                  "--rounds", "1", "--steps", "1", "--size", "tiny", "--out", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "TF32 on for all" in (tmp_path / "train-tf32.md").read_text()
    assert "TF32 off for all" in (tmp_path / "train.md").read_text()
    rows = {r["backend"]: r for r in json.loads((tmp_path / "train-tf32.json").read_text())["rows"]}
    assert rows["cuxla"]["xla_op_share"] == 1.0 and rows["cuxla"]["graphs"] >= 1
    assert rows[variant]["graphs"] == 0 and rows[variant]["warm_compile_s"] is not None
    assert [rows[b]["cold_graphs_from_cache"] for b in ("cuxla", same)] == [[0, 2], [0, 2]]
    assert variant in (tmp_path / "train-tf32.md").read_text()


def test_bench_trains_profile_sums_device_time_by_kind_and_overlaps_once():
    from cuxla._bench import step_profile

    # (name, start µs, end µs) over 2 steps; the GEMM and the fusion overlap (two streams) for 5 µs.
    events = [("sm90_xmma_gemm_f32f32_tf32f32_f32_nn", 0, 10), ("loop_add_fusion", 5, 15),
              ("pytorch_flash::flash_fwd_kernel<cutlass::half_t>", 20, 24),
              ("void at::native::multi_tensor_apply_kernel<TensorListMetadata<4>>", 30, 31),
              ("Memcpy DtoD (Device -> Device)", 40, 42), ("gemm_fusion_dot_3", 50, 52),
              ("triton_tem_fused_addmm_0", 60, 61), ("loop_add_fusion", 70, 73)]
    summary = step_profile.summarize(events, steps=2)
    assert summary["device_busy_ms"] == pytest.approx(28 / 2 / 1e3)  # 15 + 4 + 1 + 2 + 2 + 1 + 3, not 33
    assert summary["device_events"] == 4
    assert summary["ms_by_kind"] == pytest.approx({"attention": 2e-3, "matmul": 6.5e-3, "optimizer": 0.5e-3,
                                                   "copies": 1e-3, "other": 6.5e-3})
    assert [k["name"] for k in summary["longest"]] == ["loop_add_fusion", "sm90_xmma_gemm_f32f32_tf32f32_f32_nn",
                                                       "pytorch_flash::flash_fwd_kernel<cutlass::half_t>"]
    by_kind = {kind: [(k["name"], k["ms"]) for k in named] for kind, named in summary["longest_by_kind"].items()}
    assert by_kind == {"attention": [("pytorch_flash::flash_fwd_kernel<cutlass::half_t>", pytest.approx(2e-3))],
                       "matmul": [("sm90_xmma_gemm_f32f32_tf32f32_f32_nn", pytest.approx(5e-3)),
                                  ("gemm_fusion_dot_3", pytest.approx(1e-3)),
                                  ("triton_tem_fused_addmm_0", pytest.approx(0.5e-3))],
                       "optimizer": [("void at::native::multi_tensor_apply_kernel<TensorListMetadata<4>>",
                                      pytest.approx(0.5e-3))],
                       "copies": [("Memcpy DtoD (Device -> Device)", pytest.approx(1e-3))],
                       "other": [("loop_add_fusion", pytest.approx(6.5e-3))]}
    assert [(k["name"], k["kind"], k["launches"]) for k in summary["kernels"][:2]] == [
        ("loop_add_fusion", "other", 1.0), ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn", "matmul", 0.5)]
    assert len(summary["kernels"]) == 7


def test_bench_trains_profile_books_inductors_fused_elementwise_kernels_as_other():
    from cuxla._bench import step_profile

    # Named after the ops they fuse, an addmm's bias add or an attention's softmax among them.
    for name in ("triton_per_fused_add_addmm_native_layer_norm_view_7", "triton_poi_fused_addmm_clone_transpose_3",
                 "triton_red_fused__scaled_dot_product_flash_attention_sum_2"):
        assert step_profile.kind_of(name) == "other", name
    assert step_profile.kind_of("triton_tem_fused_addmm_0") == "matmul"


def test_bench_trains_profile_finds_where_the_device_waited_and_for_what():
    from cuxla._bench import step_profile

    # Two steps on the host, (0, 100) and (200, 300); events (name, start, end, launched), µs.
    events = [("fwd", 10, 30, 2), ("gemm", 25, 40, 5),    # streams overlapping: no gap between them
              ("bwd", 50, 60, 45),                        # launched 5 µs into a 10 µs gap
              ("opt", 70, 80, None),                      # launch not recorded: idle, not said to be the host's
              ("fwd", 230, 250, 229), ("bwd", 260, 270, 200), ("opt", 275, 280, 274)]
    waited = step_profile.waits(events, [(200, 300), (0, 100)])
    # Gaps: step 1 10 (start->fwd), 10 (gemm->bwd), 10 (bwd->opt); step 2 30 (start->fwd), 10, 5.
    assert waited["idle_ms"] == pytest.approx(75 / 2 / 1e3)
    # Before launch: 2 + 5 + (unknown) + 29 + 0 (launched before the gap) + 5 (launched 4 into a 5 µs gap: 4).
    assert waited["idle_before_launch_ms"] == pytest.approx((2 + 5 + 29 + 0 + 4) / 2 / 1e3)
    longest = [(w["after"], w["before"], w["ms"], w["count"]) for w in waited["longest_waits"]]
    assert longest[0] == (step_profile.STEP_START, "fwd", pytest.approx(40 / 2 / 1e3), 1)
    assert ("gemm", "bwd", pytest.approx(10 / 2 / 1e3), 0.5) in longest
    assert ("bwd", "opt", pytest.approx(15 / 2 / 1e3), 1) in longest
    # An event outside every step (another step's, unprofiled) is no gap of these.
    assert step_profile.waits([*events, ("late", 500, 510, 0)], [(0, 100), (200, 300)]) == waited


def test_host_stacks_sums_samples_under_the_timed_steps(tmp_path):
    # py-spy's raw form: frames root first, ';'-separated, then the samples.
    stacks = tmp_path / "stacks.txt"
    # The first step (its compile) is a timed_step too, but not among the timed steps.
    stacks.write_text("main (a.py:1);run_steps (t.py:2);timed_step (t.py:3);call (cuxla/torch.py:4);Execute 6\n"
                      "main (a.py:1);run_steps (t.py:2);timed_step (t.py:3);adam (o.py:5) 2\n"
                      "main (a.py:1);timed_step (t.py:3);compile (c.py:6) 12\n")
    said = subprocess.run([sys.executable, str(ROOT / "scripts" / "host-stacks"), str(stacks)],
                          capture_output=True, text=True, check=True).stdout
    assert said.startswith("8 of 20 samples inside /run_steps \\(/")
    assert "      6  75.0%  timed_step > call\n" in said and "      2  25.0%  timed_step > adam\n" in said
    assert "compile" not in said
    said = subprocess.run([sys.executable, str(ROOT / "scripts" / "host-stacks"), str(stacks),
                           r"call \(cuxla/torch.py", "1"], capture_output=True, text=True, check=True).stdout
    assert said.startswith("6 of 20 samples") and "      6 100.0%  Execute\n" in said


def test_bench_trains_profile_reads_pytorchs_profiler():
    from cuxla._bench import step_profile

    torch = pytest.importorskip("torch")
    a, b = torch.ones(256, 256), torch.ones(256, 256)
    summary = step_profile.profile_steps(lambda: a @ b, lambda: None, 3, device="cpu")
    assert summary["device_events"] >= 1 and summary["device_busy_ms"] > 0
    assert any("mm" in k["name"] for k in summary["longest"]), summary


def test_bench_train_table_says_where_each_steps_device_time_goes(tmp_path):
    from cuxla._bench import writers

    row = {"model": "bert", "size": "base", "step_ms": 45.0, "tokens_per_s": 1000.0, "cold_compile_s": 50.0,
           "warm_compile_s": 5.0, "warm_aot_autograd_s": 1.0, "warm_cuxla_s": 0.5, "warm_graphs_from_cache": [1, 2],
           "imports_s": 2.5, "warm_imports_s": 2.25, "lowering_s": 2.0,
           "xla_compile_s": 40.0, "peak_gib": 4.0, "warm_peak_gib": 3.9, "largest_xla_program_gib": [1.8, 0.4, 0.6],
           "xla_op_share": 1.0, "xla_calls_per_step": 2.0, "host_ms_in_xla_calls_per_step": 14.0,
           "device_ms_in_xla_per_step": 39.0, "graph_breaks": 0, "first_loss": 10.0, "final_loss": 9.0}
    profile = {"device_busy_ms": 41.5, "device_events": 900.0,
               "ms_by_kind": {"attention": 0.0, "matmul": 20.0, "optimizer": 2.0, "copies": 0.5, "other": 19.0},
               "longest": [{"name": "loop_add_fusion", "ms": 3.25}],
               "longest_by_kind": {"other": [{"name": "loop_add_fusion", "ms": 3.25}],
                                   "copies": [{"name": "Memcpy DtoD (Device -> Device)", "ms": 0.5}]},
               "idle_ms": 3.25, "idle_before_launch_ms": 2.5,
               "longest_waits": [{"after": "the step's start", "before": "loop_add_fusion", "ms": 1.5, "count": 1}]}
    rows = [{**row, "backend": "cuxla", "profile": profile},
            {**row, "backend": "inductor", "profile": {"error": "RuntimeError: CUPTI is not there"}},
            {**row, "backend": "eager", "profile": None}]
    writers.write_train(rows, "a test card", 2, 4, False, False, tmp_path)
    table = (tmp_path / "train.md").read_text()
    assert "| 4.00 (3.90); largest program 1.80 + 0.40 + 0.60 |" in table
    assert "| 5.00 (1.00 + 0.50; 1 of 2 graphs cached) |" in table
    assert "not booked in its compile (s, cold process, warm): bert cuxla 2.50, 2.25; bert inductor 2.50, 2.25; " \
        "bert eager 2.50, 2.25." in table
    assert "| bert | cuxla | 45.00 | 41.50 | 3.50 | 3.25 (2.50) | 900 | 0.00 | 20.00 | 2.00 | 0.50 | 19.00 | " \
           "loop_add_fusion 3.25 |" in table
    assert "| bert | cuxla | the step's start | loop_add_fusion | 1.50 | 1.0 |" in table
    assert "| bert | inductor | 45.00 | profile failed: RuntimeError: CUPTI is not there |" in table
    profiled = table[table.index("| model | backend | step | busy |"):].split("\n\n")[0].splitlines()[2:]
    assert [line.split(" | ")[1] for line in profiled] == ["cuxla", "inductor"]  # eager's has no profile
    assert "| bert | cuxla | other | loop_add_fusion 3.25 |\n| bert | cuxla | copies | Memcpy DtoD (Device -> Device) " \
           "0.50 |" in table
    said = writers.step_profile_said(profile, 45.0)
    assert said.startswith("device busy 41.50 of the step's 45.00 ms, 900")
    assert said.endswith("device waiting 3.25 (2.50) ms a step; longest: the step's start -> loop_add_fusion 1.50")


def test_bench_train_splits_a_steps_peak_memory_by_phase(tmp_path):
    # A counter standing in for the allocator's: each phase allocates its own bytes and frees them;
    # a phase's peak is read as it ends, the counter started again for the next.
    pytest.importorskip("torch")
    from cuxla._bench import train_child, writers

    in_use, peak = [1.0], [1.0]

    def allocate(gib):
        in_use[0] += gib
        peak[0] = max(peak[0], in_use[0])
        in_use[0] -= gib

    def step(at_phase_end):
        for phase, gib in (("forward", 2.0), ("backward", 3.0), ("optimizer", 0.5)):
            allocate(gib)
            at_phase_end(phase)

    def reset():
        peak[0] = in_use[0]

    by_phase = train_child.memory_by_phase(step, lambda: None, lambda: peak[0] * 2**30, reset)
    assert by_phase == {"forward": 3.0, "backward": 4.0, "optimizer": 1.5}
    assert train_child.memory_by_phase(step, lambda: None, None, None) == {}  # no counter: not split
    row = {"model": "gpt2", "size": "base", "step_ms": 190.0, "tokens_per_s": None, "cold_compile_s": 20.0,
           "warm_compile_s": None, "warm_cuxla_s": None, "lowering_s": None, "peak_gib": 4.0,
           "largest_xla_program_gib": None, "xla_op_share": None, "xla_calls_per_step": None, "graph_breaks": 0,
           "first_loss": 10.0, "final_loss": 9.0}
    rows = [{**row, "backend": "eager", "peak_gib_by_phase": by_phase}, {**row, "backend": "cuxla"}]
    writers.write_train(rows, "a test card", 2, 4, False, False, tmp_path)
    table = (tmp_path / "train.md").read_text()
    assert "| model | backend | forward | backward | optimizer |" in table
    assert "| gpt2 | eager | 3.00 | 4.00 | 1.50 |" in table and "| gpt2 | cuxla | " not in \
        table[table.index("| model | backend | forward"):].split("\n\n")[0]


def test_bench_train_splits_a_steps_host_time_by_phase(tmp_path, monkeypatch):
    # A clock the fake step moves: each phase takes the host its own time and
    # leaves the device work that the wait after the step takes.
    pytest.importorskip("torch")
    from cuxla._bench import train_child, writers

    now, queued = [0.0], [0.0]
    monkeypatch.setattr(train_child.time, "perf_counter", lambda: now[0])

    def step(at_phase_end):
        for phase, host_s, device_s in (("forward", 0.002, 0.010), ("backward", 0.003, 0.020),
                                        ("optimizer", 0.001, 0.004)):
            now[0] += host_s
            queued[0] += device_s
            at_phase_end(phase)

    def sync():  # the device's work left after the host's part of the step
        now[0] += max(queued[0] - 0.006, 0.0)
        queued[0] = 0.0

    host = train_child.host_by_phase(step, sync, 3)
    assert host == pytest.approx({"forward": 2.0, "backward": 3.0, "optimizer": 1.0, "waiting for the device": 28.0})
    row = {"model": "gpt2", "size": "base", "step_ms": 34.0, "tokens_per_s": None, "cold_compile_s": 20.0,
           "warm_compile_s": None, "warm_cuxla_s": None, "lowering_s": None, "peak_gib": 4.0,
           "largest_xla_program_gib": None, "xla_op_share": None, "xla_calls_per_step": None, "graph_breaks": 0,
           "first_loss": 10.0, "final_loss": 9.0}
    writers.write_train([{**row, "backend": "cuxla", "host_ms_by_phase": host}, {**row, "backend": "eager"}],
                        "a test card", 2, 4, False, False, tmp_path)
    table = (tmp_path / "train.md").read_text()
    assert "| model | backend | forward | backward | optimizer | waiting for the device |" in table
    assert "| gpt2 | cuxla | 2.00 | 3.00 | 1.00 | 28.00 |" in table and "| gpt2 | eager | 2.00" not in table


def test_a_training_step_says_where_each_phase_ends():
    torch = pytest.importorskip("torch")
    from cuxla import _models

    workload = _models.mlp("cpu")
    step = _models.training_step(workload)
    seen = []

    def at_phase_end(phase):
        grads = [p.grad for p in workload.model.parameters()]
        seen.append((phase, all(g is None for g in grads), workload.model[0].weight.clone()))

    before = workload.model[0].weight.clone()
    step(at_phase_end)
    assert [phase for phase, *_ in seen] == list(_models.PHASES)
    (_, no_grads_forward, w_forward), (_, no_grads_backward, w_backward), (_, _, w_optimizer) = seen
    assert no_grads_forward and not no_grads_backward  # the backward made the gradients
    assert torch.equal(w_forward, before) and torch.equal(w_backward, before) and not torch.equal(w_optimizer, before)


def test_bench_train_peak_is_the_pools_own_where_one_pool_serves_both():
    # Two pools: each runtime's peak, added (they may peak apart); one pool: its peak of both at once.
    train = importlib.import_module("cuxla._bench.train")
    two_pools = {"peak_torch_gib": 1.5, "peak_xla_gib": 2.0}
    assert train._peak_gib(two_pools) == 3.5
    assert train._peak_gib({**two_pools, "peak_pool_gib": 2.75}) == 2.75
    assert train._peak_gib({"peak_torch_gib": None, "peak_xla_gib": 0.0}) is None


def test_bench_train_names_a_malformed_backend(tmp_path):
    result = _run("bench", "train", "--backends", "eager,cuxla[CUXLA_LOG]", "--out", str(tmp_path))
    assert result.returncode == 1 and not (tmp_path / "train.md").exists()
    assert result.stderr.strip() == "cuxla: --backends: 'cuxla[CUXLA_LOG]' is not BACKEND or BACKEND[NAME=VALUE,...]"


def test_bench_handoff_on_cpu_marks_gpu_targets_not_applicable(tmp_path):
    result = _run("bench", "handoff", "--out", str(tmp_path), "--max-bytes", "4", "--budget", "0.02", env=NO_GPU)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "from an idle GPU (GPU target <= 1.2x: n/a on cpu)" in result.stdout
    assert "(target <= 1.2x)" not in result.stdout


def test_bench_memory_needs_a_gpu_and_says_so(tmp_path):
    result = _run("bench", "memory", "--out", str(tmp_path), env=NO_GPU)
    assert result.returncode == 1 and "no GPU" in result.stdout, result.stdout + result.stderr
    assert not (tmp_path / "memory.md").exists()


def test_bench_memory_table_and_plot(tmp_path):
    # The rows as memory_child prints them (the measurements are the GPU run's).
    from cuxla._bench import writers
    from cuxla._bench.memory_child import MEASURES, SETTINGS

    rows = [{"setting": s, "measure": MEASURES["bert"], "peak_gib": 3.0 + i, "step_ms": 40.0,
             "loss": 7.0} for i, s in enumerate(SETTINGS)]
    rows[1].update(xla_op_share=1.0, torch_peak_gib=1.5, xla_peak_gib=3.5, backward_programs=1)
    rows[2].update(xla_op_share=1.0, backward_programs=4)  # CUXLA_BACKWARD_PROGRAMS=4
    rows[0]["need_gib"], rows[2]["need_gib"] = 2.5, 4.0
    rows += [{"setting": "one_pool", "measure": MEASURES["batch"], "budget_gib": 8.0, "batch": 4096},
             {"setting": "two_pools", "measure": MEASURES["op"], "us_per_op": 4.25},
             {"setting": "eager", "measure": MEASURES["batch"], "error": "RuntimeError: boom"}]
    writers.write_memory(rows, "a test card", SETTINGS, tmp_path)
    table = (tmp_path / "memory.md").read_text()
    assert ("| BERT-base 16 x 128 training | 3.00 GiB (in use at once: 2.50), step 40.0 ms | 4.00 GiB (own peaks: "
            "PyTorch 1.50, XLA 3.50), step 40.0 ms, 100% of ATen ops in XLA | 5.00 GiB (in use at once: 4.00), "
            "step 40.0 ms, 100% of ATen ops in XLA, the backward in 4 programs |") in table
    # One pool (5 GiB) against the larger of eager's peak (3) and XLA's own (3.5).
    assert "BERT-base 16 x 128 training: one pool 5.00 GiB against the larger of eager's peak and XLA's own, " \
           "3.50 GiB: +43%" in table
    # Of it, what the steps had in use at once (4 against eager's 2.5), and what the pool held beyond.
    assert "the compiled steps' bytes in use at once, 4.00 GiB (+60% over eager's 2.50); the pool held 5.00, " \
           "+25% over them" in table
    assert len([line for line in table.splitlines() if line.startswith("| largest MLP batch")]) == 1
    assert "4096 (in 8 GiB)" in table and "4.25 µs" in table and "failed: RuntimeError: boom" in table
    assert (tmp_path / "memory.png").stat().st_size > 1000
    assert json.loads((tmp_path / "memory.json").read_text())["rows"] == rows


def test_bench_memory_finds_the_largest_batch_to_an_eighth():
    from cuxla._bench.memory_child import largest_that_fits

    tried = []

    def fits(batch):
        tried.append(batch)
        return batch <= 5000

    assert largest_that_fits(fits) == 4608  # 4096 doubled fails; 4096 + 512 fits, + 1024 does not
    assert tried == [256, 512, 1024, 2048, 4096, 8192, 4608, 5120]
    assert largest_that_fits(lambda batch: False) == 0
    assert largest_that_fits(lambda batch: True, limit=1024) == 1024 + 7 * 128


def test_bench_memory_children_run_without_the_allocator_settings_around_them(monkeypatch):
    # A child's setting is its name: PyTorch's and cuxla's allocator switches, and
    # the compile cache (a cached executable skips XLA's autotuning), stay out.
    memory = importlib.import_module("cuxla._bench.memory")  # the module; the package exports its function
    seen = {}

    def run(command, **options):
        seen.update(options["env"])
        return subprocess.CompletedProcess(command, 0, stdout='{"setting": "eager"}\n', stderr="")

    monkeypatch.setattr(memory.subprocess, "run", run)
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "CUXLA_ALLOCATOR", "CUXLA_ONE_POOL", "CUXLA_MEM_FRACTION"):
        monkeypatch.setenv(name, "1")
    assert memory._measure("eager", "op") == {"setting": "eager"}
    assert seen["CUXLA_CACHE_DIR"] == "" and "PATH" in seen
    assert not {"PYTORCH_CUDA_ALLOC_CONF", "CUXLA_ALLOCATOR", "CUXLA_ONE_POOL", "CUXLA_MEM_FRACTION"} & set(seen)
