"""The command line: `info`, `demo` and `bench`."""
import json
import subprocess
import sys

import pytest

from cuxla import _demo


def _run(*args):
    return subprocess.run([sys.executable, "-m", "cuxla", *args], capture_output=True, text=True, timeout=600)


def test_info_reports_plugins_versions_and_devices(client):
    result = _run("info")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "built against PJRT C API 0." in out
    assert f"[{client.platform}]" in out and client.plugin in out
    assert "PJRT C API 0." in out and "device 0:" in out
    assert "CUDA driver:" in out


def test_info_says_why_a_platform_is_missing(client):
    result = _run("info")
    for platform in ("cuda", "cpu"):
        assert f"[{platform}]" in result.stdout
    assert "looked at" in result.stdout


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
        "train": ["--models", "mlp", "--backends", "eager,cuxla", "--steps", "3"],
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
