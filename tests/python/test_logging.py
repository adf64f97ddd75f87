"""XLA's environment as cuxla sets it: its C++ logging in the plugins
(warnings and errors by default, INFO lines with CUXLA_LOG=info, the user's
own XLA setting standing) and its flags (command buffers off unless asked for,
the autotuning level when asked for)."""
import os
import re
import subprocess
import sys

import pytest

import cuxla

# The CPU plugin logs a client's device count at INFO when it makes one.
CLIENT = "import cuxla; cuxla.Client('cpu', device_count=2)"
# JAX, imported after cuxla (as cuxla.dynamo does), sets a level of its own
# unless os.environ already has one.
CLIENT_AFTER_JAX = "import cuxla, jax; cuxla.Client('cpu', device_count=2)"
PLUGIN_INFO = re.compile(r"^I\d{4} .*cpu_device_count set via create_options: 2$", re.M)
ANY_INFO = re.compile(r"^I\d{4} ", re.M)


def _client_stderr(code: str = CLIENT, **variables: str) -> str:
    """A fresh process's stderr as it makes a CPU client, with nothing of
    this one's environment that sets XLA's logging (importing cuxla gave
    this process a level)."""
    if not cuxla._cuxla.find_plugin("cpu", cuxla._client.package_dirs())[0]:
        pytest.skip("needs the CPU plugin")
    env = {"PATH": os.environ.get("PATH", ""), **variables}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stderr


def test_plugin_info_lines_are_silent_by_default():
    stderr = _client_stderr()
    assert not ANY_INFO.search(stderr), stderr
    # absl prints it before the first line it writes, and here it writes none.
    assert "absl::InitializeLog" not in stderr, stderr


def _names(variables: dict) -> str:
    return ",".join(f"{name}={value}" for name, value in variables.items())


@pytest.mark.parametrize("variables", [
    {"CUXLA_LOG": "info"},
    {"CUXLA_LOG": "info", "TF_CPP_MIN_LOG_LEVEL": "2"},  # CUXLA_LOG decides when set
    {"TF_CPP_MIN_LOG_LEVEL": "0"},  # else the user's own XLA level stands
    {"TF_CPP_MAX_VLOG_LEVEL": "1"},  # and so does a request for XLA's VLOG lines
], ids=_names)
def test_plugin_info_lines_show_when_asked_for(variables):
    assert PLUGIN_INFO.search(_client_stderr(**variables)), variables


def test_cuxla_log_info_holds_for_a_plugin_opened_after_importing_jax():
    pytest.importorskip("jax")
    assert PLUGIN_INFO.search(_client_stderr(CLIENT_AFTER_JAX, CUXLA_LOG="info"))


@pytest.mark.parametrize("variables", [
    {"CUXLA_LOG": "warning", "TF_CPP_MIN_LOG_LEVEL": "0"},
    {"CUXLA_LOG": "error"},
], ids=_names)
def test_plugin_info_lines_stay_silent_at_a_higher_cuxla_log(variables):
    stderr = _client_stderr(**variables)
    assert not ANY_INFO.search(stderr), stderr


def test_cuxla_log_that_is_no_level_is_a_value_error(monkeypatch, client):
    monkeypatch.setenv("CUXLA_LOG", "loud")
    with pytest.raises(ValueError, match=r"CUXLA_LOG='loud' is not a log level \(use info, warning or error\)"):
        cuxla.Plugin.load(client.plugin)


@pytest.mark.parametrize("variables, flags", [
    ({}, "--xla_gpu_enable_command_buffer= --xla_gpu_enable_triton_gemm=false --xla_gpu_dot_merger_threshold_mb=0"
         " --xla_cpu_use_xnnpack=false"),
    ({"CUXLA_COMMAND_BUFFERS": "0", "CUXLA_TRITON_GEMM": "1", "CUXLA_DOT_MERGER": "1"},
     "--xla_gpu_enable_command_buffer= --xla_cpu_use_xnnpack=false"),
    ({"XLA_FLAGS": "--xla_dump_to=/tmp/d", "CUXLA_TRITON_GEMM": "1", "CUXLA_DOT_MERGER": "1"},
     "--xla_dump_to=/tmp/d --xla_gpu_enable_command_buffer= --xla_cpu_use_xnnpack=false"),
    ({"XLA_FLAGS": "--xla_gpu_enable_command_buffer=FUSION", "CUXLA_TRITON_GEMM": "1", "CUXLA_DOT_MERGER": "1"},
     "--xla_gpu_enable_command_buffer=FUSION --xla_cpu_use_xnnpack=false"),
    ({"CUXLA_COMMAND_BUFFERS": "1", "CUXLA_TRITON_GEMM": "1", "CUXLA_DOT_MERGER": "1"}, "--xla_cpu_use_xnnpack=false"),
    ({"CUXLA_COMMAND_BUFFERS": "1", "CUXLA_TRITON_GEMM": "1", "CUXLA_DOT_MERGER": "1",
      "XLA_FLAGS": "--xla_cpu_use_xnnpack=true"}, "--xla_cpu_use_xnnpack=true"),
    ({"CUXLA_COMMAND_BUFFERS": "1", "CUXLA_TRITON_GEMM": "0", "CUXLA_DOT_MERGER": "1"},
     "--xla_gpu_enable_triton_gemm=false --xla_cpu_use_xnnpack=false"),
    ({"CUXLA_COMMAND_BUFFERS": "1", "CUXLA_DOT_MERGER": "1", "XLA_FLAGS": "--xla_gpu_enable_triton_gemm=true"},
     "--xla_gpu_enable_triton_gemm=true --xla_cpu_use_xnnpack=false"),
    ({"CUXLA_COMMAND_BUFFERS": "1", "CUXLA_TRITON_GEMM": "1", "CUXLA_DOT_MERGER": "0"},
     "--xla_gpu_dot_merger_threshold_mb=0 --xla_cpu_use_xnnpack=false"),
    ({"CUXLA_COMMAND_BUFFERS": "1", "CUXLA_TRITON_GEMM": "1", "XLA_FLAGS": "--xla_gpu_dot_merger_threshold_mb=32"},
     "--xla_gpu_dot_merger_threshold_mb=32 --xla_cpu_use_xnnpack=false"),
    ({"CUXLA_AUTOTUNE_LEVEL": "0", "CUXLA_TRITON_GEMM": "1", "CUXLA_DOT_MERGER": "1"},
     "--xla_gpu_enable_command_buffer= --xla_gpu_autotune_level=0 --xla_cpu_use_xnnpack=false"),
    ({"CUXLA_AUTOTUNE_LEVEL": "0", "CUXLA_TRITON_GEMM": "1", "CUXLA_DOT_MERGER": "1",
      "XLA_FLAGS": "--xla_gpu_autotune_level=3"},
     "--xla_gpu_autotune_level=3 --xla_gpu_enable_command_buffer= --xla_cpu_use_xnnpack=false"),
], ids=lambda v: _names(v) if isinstance(v, dict) else "")
def test_xla_flags_cuxla_sets_unless_the_users_own_say_otherwise(variables, flags):
    # What a fresh process's XLA reads, and its children inherit.
    env = {"PATH": os.environ.get("PATH", ""), **variables}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    result = subprocess.run([sys.executable, "-c", "import os, cuxla; print(os.environ.get('XLA_FLAGS'))"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == flags


@pytest.mark.parametrize("variable", ["CUXLA_COMMAND_BUFFERS", "CUXLA_TRITON_GEMM", "CUXLA_DOT_MERGER"])
def test_a_switch_that_is_neither_0_nor_1_is_a_value_error(monkeypatch, client, variable):
    monkeypatch.setenv(variable, "on")
    with pytest.raises(ValueError, match=rf"{variable}='on' is neither 0 nor 1"):
        cuxla.Plugin.load(client.plugin)


def test_autotune_level_outside_0_to_4_is_a_value_error(monkeypatch, client):
    monkeypatch.setenv("CUXLA_AUTOTUNE_LEVEL", "9")
    with pytest.raises(ValueError, match=r"CUXLA_AUTOTUNE_LEVEL='9' is not a level from 0 to 4"):
        cuxla.Plugin.load(client.plugin)
