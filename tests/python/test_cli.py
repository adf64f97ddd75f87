"""The command line: `info` and `demo`."""
import subprocess
import sys


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
