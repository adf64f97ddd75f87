"""device=, client= and the other arguments a user passes: what PyTorch and JAX
users write is accepted, anything else is one TypeError or ValueError sentence
naming what was given, and errors have one type whatever the plugin."""
import re

import numpy as np
import pytest
import torch

import cuxla
from cuxla import _cuxla

from programs import ADD_2x3 as ADD


def one_sentence(error: BaseException) -> str:
    text = str(error)
    for leak in ("incompatible function arguments", "std::", "Invoked with", "_core", "\n"):
        assert leak not in text, f"{type(error).__name__}: {text!r}"
    return text


@pytest.mark.parametrize("device", ["cpu", "CPU", "cpu:0", "Cpu:0", torch.device("cpu"), torch.device("cpu", 0), 0])
def test_torch_style_devices_are_accepted(device):
    client = cuxla.Client("cpu")
    first = client.devices()[0]
    t = torch.arange(4.0)
    a = cuxla.from_dlpack(t, device=device, client=client)
    assert a.device == first
    assert cuxla.asarray(np.ones(2), device=device, client=client).device == first
    assert client.memory_stats(device) == client.memory_stats(first) == first.memory_stats()


@pytest.mark.parametrize("client", ["cpu", "CPU"])
def test_platform_names_are_clients(client):
    program = cuxla.compile(ADD, client=client)
    (out,) = program(cuxla.asarray(np.ones((2, 3), np.float32), client=client),
                     cuxla.asarray(np.ones((2, 3), np.float32), client=client))
    assert out.device.platform == "cpu"
    assert cuxla.from_dlpack(torch.ones(2), client=client).device.platform == "cpu"
    assert cuxla.Client(client.upper()).platform == "cpu"


def test_a_device_index_names_the_device_of_that_index():
    client = cuxla.Client("cpu", device_count=2)
    second = client.devices()[1]
    assert cuxla.from_dlpack(torch.ones(2), device=1, client=client).device == second
    assert cuxla.asarray([1.0], device=1, client=client).device == second


@pytest.mark.parametrize("call, error, says", [
    (lambda: cuxla.from_dlpack(torch.ones(2), device=1.5), TypeError, "not a float 1.5"),
    (lambda: cuxla.from_dlpack(torch.ones(2), device=True), TypeError, "not a bool True"),
    (lambda: cuxla.from_dlpack(torch.ones(2), device=[0]), TypeError, "not a list [0]"),
    (lambda: cuxla.from_dlpack(torch.ones(2), device="tpu:0"), ValueError, "not 'tpu'"),
    (lambda: cuxla.from_dlpack(torch.ones(2), device="cpu:x"), ValueError, "no index after ':'"),
    (lambda: cuxla.from_dlpack(torch.ones(2), device="cpu:7"), ValueError, "'cpu:7' does not exist"),
    (lambda: cuxla.from_dlpack(torch.ones(2), device=99), ValueError, "device 99 does not exist"),
    (lambda: cuxla.from_dlpack(torch.ones(2), client=3), TypeError, "not a int 3"),
    (lambda: cuxla.from_dlpack(torch.ones(2), client="vulkan"), ValueError, "not 'vulkan'"),
    (lambda: cuxla.from_dlpack(torch.ones(2), copy="yes"), TypeError, "not a str 'yes'"),
    (lambda: cuxla.from_dlpack(None), TypeError, "NoneType is neither a DLPack capsule"),
    (lambda: cuxla.from_dlpack(torch.ones(2), device="cuda:0", client="cpu"), ValueError, "not a device of the cpu"),
    (lambda: cuxla.asarray([1.0], device=object()), TypeError, "not a object"),
    (lambda: cuxla.compile(ADD, client=object()), TypeError, "client must be a cuxla.Client"),
    (lambda: cuxla.compile(3), TypeError, "program must be str or bytes"),
    (lambda: cuxla.Client(3), TypeError, "not a int 3"),
    (lambda: cuxla.Client("tpu"), ValueError, "not 'tpu'"),
    (lambda: cuxla.Mesh("cpu", ("x",)), TypeError, "devices must be a sequence of cuxla.Device"),
    (lambda: cuxla.Mesh(cuxla.devices(), 3), TypeError, "axis_names must be a name or a sequence"),
    (lambda: cuxla.Mesh(cuxla.devices(), "x", shape="2"), TypeError, "shape must be a sequence of ints"),
    (lambda: cuxla.Mesh(cuxla.devices(), "x").hlo_sharding("x"), TypeError, "a partition spec must be a sequence"),
    (lambda: cuxla.shard(cuxla.asarray([1.0]), cuxla.Mesh(cuxla.devices(), "x"), ["x"]), TypeError,
     "shard takes the shards as a sequence"),
    (lambda: cuxla.shard([cuxla.asarray([1.0])], cuxla.Mesh(cuxla.devices()[:1], "x"), "x"), TypeError,
     "spec names a mesh axis or None per dimension"),
    (lambda: cuxla.compile(ADD).call_sharded([cuxla.asarray([1.0])]), TypeError,
     "call_sharded's args must be a sequence of cuxla.ShardedArray"),
    (lambda: cuxla.asarray([1.0]).__dlpack__(max_version=3), TypeError, "max_version must be None or a (major"),
    (lambda: cuxla.asarray([1.0]).__dlpack__(dl_device="cpu"), TypeError, "dl_device must be None or a (device"),
    (lambda: cuxla.asarray([1.0]).__dlpack__(copy="no"), TypeError, "copy must be None, True or False"),
    (lambda: __import__("cuxla.torch").torch.to_torch("x"), TypeError, "the array to export must be a cuxla.Array"),
    (lambda: cuxla.Client("cpu", device_count="2"), TypeError, "device_count must be None or an int"),
    (lambda: cuxla.Client("cpu", preallocate="yes"), TypeError, "preallocate must be None, True or False"),
    (lambda: cuxla.Client("cpu", memory_fraction="half"), TypeError, "memory_fraction must be None or a number"),
])
def test_bad_arguments_are_one_sentence(call, error, says):
    with pytest.raises(error) as caught:
        call()
    assert says in one_sentence(caught.value)


def test_one_axis_name_makes_a_mesh_as_in_jax():
    devices = cuxla.Client("cpu", device_count=2).devices()
    mesh = cuxla.Mesh(devices, "data")
    assert mesh.axis_names == ["data"] and mesh.shape == (2,)
    assert repr(mesh) == "Mesh(shape=(2,), axis_names=('data',))"


def test_a_refused_program_is_a_compile_error_with_the_compilers_words():
    for program in ("not a program", "", b"\x00\x01"):
        with pytest.raises(cuxla.CompileError) as caught:
            cuxla.compile(program, client="cpu")
        assert isinstance(caught.value, ValueError)
    with pytest.raises(cuxla.CompileError, match="custom op 'not' is unknown"):
        cuxla.compile("not a program", client="cpu")


def test_a_platform_without_a_plugin_is_no_device_error(tmp_path):
    # An empty package directory: no platform's plugin can be found there.
    for platform, install in (("cuda", "pip install 'jax[cuda13]'"), ("cpu", "pip install xla-cpu-pjrt")):
        with pytest.raises(cuxla.NoDeviceError, match=re.escape(f"no PJRT plugin found for platform '{platform}' "
                                                                f"({install} installs one)")) as caught:
            _cuxla.choose_plugin(platform, "", [str(tmp_path)])
        assert isinstance(caught.value, RuntimeError)
