"""Clients, devices and the memory options."""
import os

import pytest

import cuxla


def test_client_platform_and_devices(client):
    devices = client.devices()
    assert devices, "a client has at least one device"
    assert len({d.id for d in devices}) == len(devices)
    for d in devices:
        assert d.platform == client.platform
        assert d.local_hardware_id >= 0
        assert isinstance(d.kind, str) and d.kind


def test_device_lookup_by_id(client):
    for d in client.devices():
        assert client._device(d.id) == d
    with pytest.raises(ValueError, match="no .* device with id 9999"):
        client._device(9999)


def test_default_client_is_created_once():
    assert cuxla.default_client() is cuxla.default_client()
    assert cuxla.devices() == cuxla.default_client().devices()


def test_memory_options_are_refused_off_cuda(client):
    if client.platform == "cuda":
        pytest.skip("CUDA accepts memory options")
    with pytest.raises(ValueError, match="cuda platform only"):
        cuxla.Client(client.platform, preallocate=True)


@pytest.mark.parametrize("fraction", [0.0, -0.5, 1.5])
def test_memory_fraction_out_of_range_is_a_value_error(fraction):
    with pytest.raises(ValueError, match=r"memory_fraction must be in \(0, 1\]"):
        cuxla.Client._create("/nonexistent.so", "cuda", None, fraction, None, [])


def test_unknown_allocator_is_a_value_error():
    with pytest.raises(ValueError, match="allocator must be one of"):
        cuxla.Client._create("/nonexistent.so", "cuda", None, None, "magic", [])


def test_malformed_environment_variable_names_it(monkeypatch):
    monkeypatch.setenv("CUXLA_PREALLOCATE", "maybe")
    with pytest.raises(ValueError, match="CUXLA_PREALLOCATE='maybe'"):
        cuxla.Client._create("/nonexistent.so", "cuda", None, None, None, [])


def test_cuda_client_does_not_preallocate_by_default(client):
    if client.platform != "cuda":
        pytest.skip("memory options exist on CUDA only")
    assert client.options["preallocate"] is False


def test_device_count_sets_a_cpu_clients_devices():
    if not cuxla._cuxla.find_plugin("cpu", cuxla._client.package_dirs())[0]:
        pytest.skip("needs the CPU plugin")
    client = cuxla.Client("cpu", device_count=3)
    assert [d.id for d in client.devices()] == [0, 1, 2]
    assert client.global_device_count == 3 and client.options["device_count"] == 3
    with pytest.raises(ValueError, match="device_count applies to the cpu platform only"):
        cuxla.Client._create("/nonexistent.so", "cuda", None, None, None, [], 2)


def test_several_processes_need_a_store_and_a_node_id_in_range():
    with pytest.raises(ValueError, match="needs a kv_store"):
        cuxla.Client._create("/nonexistent.so", "cuda", None, None, None, [], None, 0, 2)
    with pytest.raises(ValueError, match=r"node_id must be in \[0, num_nodes\): got node_id 3, num_nodes 2"):
        cuxla.Client._create("/nonexistent.so", "cuda", None, None, None, [], None, 3, 2, object())


@pytest.mark.skipif(not os.environ.get("CUXLA_FAKE_KV_PLUGIN"),
                    reason="needs the fake plugin of the C++ tests (scripts/test sets CUXLA_FAKE_KV_PLUGIN)")
def test_a_torch_distributed_store_serves_the_plugins_key_value_callbacks():
    # The fake plugin's client creation puts a key, gets it back and
    # try-gets an absent one through the store, then reports what it saw.
    import datetime

    import torch.distributed as dist

    plugin = os.environ["CUXLA_FAKE_KV_PLUGIN"]
    store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=10))
    with pytest.raises(RuntimeError, match="node 1 of 2 read 'hello from 1'; try-get of an absent key: NOT_FOUND"):
        cuxla.Client("cuda", plugin=plugin, node_id=1, num_nodes=2, kv_store=dist.PrefixStore("cuxla", store))
    assert store.get("cuxla/fake/node1") == b"hello from 1"

    class Broken:
        def set(self, key, value):
            raise OSError("disk full")

    with pytest.raises(RuntimeError, match="cuxla key-value store put: OSError: disk full"):
        cuxla.Client("cuda", plugin=plugin, node_id=0, num_nodes=2, kv_store=Broken())
