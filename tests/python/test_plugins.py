"""Finding and loading PJRT plugins, and refusing what is not one."""
import os
import sys

import pytest

import cuxla
from cuxla import _cuxla


def test_plugin_loaded_twice_is_one_handle(client):
    first = cuxla.Plugin.load(client.plugin)
    second = cuxla.Plugin.load(client.plugin.replace("/", "/./", 1))
    assert first.path == second.path == os.path.realpath(client.plugin)
    assert first.api_version == second.api_version == client.api_version


def test_plugin_reports_major_version_zero_and_attributes(client):
    plugin = cuxla.Plugin.load(client.plugin)
    major, minor = plugin.api_version
    assert major == 0 and minor > 0
    assert "xla_version" in dict(plugin.attributes())


def test_missing_plugin_path_is_a_value_error(tmp_path):
    path = tmp_path / "nowhere" / "plugin.so"
    with pytest.raises(ValueError, match="no such file") as info:
        cuxla.Client("cpu", plugin=path)
    assert str(path) in str(info.value)


def test_file_that_is_not_a_plugin_is_a_value_error(tmp_path):
    path = tmp_path / "not_a_plugin.so"
    path.write_text("this is text, not ELF")
    with pytest.raises(ValueError, match="cannot load PJRT plugin") as info:
        cuxla.Client("cpu", plugin=path)
    assert str(path) in str(info.value)


def test_plugin_built_for_another_architecture_is_a_value_error(tmp_path):
    # A real shared library (the nanobind module) marked for AArch64 (ELF
    # e_machine 183) or, on an AArch64 host, for x86-64 (62).
    image = bytearray(open(_cuxla.__file__, "rb").read())
    other = 62 if int.from_bytes(image[18:20], "little") == 183 else 183
    image[18:20] = other.to_bytes(2, "little")
    path = tmp_path / "foreign_plugin.so"
    path.write_bytes(bytes(image))
    with pytest.raises(ValueError, match=f"built for another architecture .*machine {other};") as info:
        cuxla.Plugin.load(str(path))
    assert str(path) in str(info.value)


def test_shared_library_without_get_pjrt_api_is_refused():
    # The nanobind module itself is a shared library with no GetPjrtApi.
    with pytest.raises(ValueError, match="GetPjrtApi"):
        cuxla.Plugin.load(_cuxla.__file__)


def test_unknown_plugin_file_needs_a_platform(tmp_path):
    path = tmp_path / "mystery_plugin.so"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="cannot tell the platform"):
        cuxla.Client(plugin=path)


def test_search_lists_where_it_looked_when_nothing_is_found():
    found, tried = _cuxla.find_plugin("cuda", ["/nonexistent"])
    assert found is None
    assert any("xla_cuda13" in path for path, _ in tried)


def test_environment_variable_overrides_discovery(monkeypatch, client):
    monkeypatch.setenv("CUXLA_PJRT_PLUGIN", client.plugin)
    found, tried = _cuxla.find_plugin(client.platform, [])
    assert found == client.plugin
    assert tried == [(client.plugin, "found")]


def test_plugin_for_another_platform_is_refused(client):
    other = "cuda" if client.platform == "cpu" else "cpu"
    with pytest.raises(ValueError, match=f"makes '{client.platform}' clients, not '{other}'"):
        cuxla.Client(other, plugin=client.plugin)


def test_no_plugin_found_names_every_place_looked(monkeypatch):
    monkeypatch.setattr(sys, "path", ["/nonexistent"])
    monkeypatch.delenv("CUXLA_PJRT_PLUGIN", raising=False)
    with pytest.raises(cuxla.NoDeviceError, match="(?s)no PJRT plugin found for platform 'cpu'.*xla_cpu_pjrt.so"):
        cuxla.Client("cpu")


def test_missing_plugin_of_unknown_name_says_no_such_file(tmp_path):
    path = tmp_path / "nowhere.so"
    with pytest.raises(ValueError) as info:
        cuxla.Client(plugin=path)
    assert str(info.value) == f"cannot load PJRT plugin {path}: no such file"


@pytest.mark.parametrize("platform", [None, "cpu"])
def test_missing_plugin_named_by_the_environment_is_an_error(monkeypatch, tmp_path, platform):
    path = tmp_path / "nowhere.so"
    monkeypatch.setenv("CUXLA_PJRT_PLUGIN", str(path))
    with pytest.raises(ValueError) as info:
        cuxla.Client(platform)
    assert str(info.value) == f"CUXLA_PJRT_PLUGIN={path}: no such file"
    assert _cuxla.find_plugin("cpu", cuxla._client.package_dirs()) == (
        None, [(str(path), "no such file (from CUXLA_PJRT_PLUGIN)")])
