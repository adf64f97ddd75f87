"""Several GPUs (scripts/gpu-check on a machine with two or more; skipped on
fewer): a tensor on any GPU maps to its own XLA device, also when another
device is current and under CUDA_VISIBLE_DEVICES remapping; another GPU asked
for is a copy."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import cuxla
import cuxla.torch as ct

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two or more CUDA GPUs")

SCALE = """
func.func public @main(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %two = stablehlo.constant dense<2.0> : tensor<1024xf32>
  %out = stablehlo.multiply %x, %two : tensor<1024xf32>
  return %out : tensor<1024xf32>
}
"""


def test_a_tensor_on_another_gpu_than_the_current_one_round_trips_zero_copy():
    client = cuxla._client.client_for_platform("cuda")
    last = torch.cuda.device_count() - 1
    with torch.cuda.device(0):  # the current device is not the tensor's
        t = torch.arange(1024, dtype=torch.float32, device=f"cuda:{last}")
        a = cuxla.from_dlpack(t)
        assert a.device.local_hardware_id == last and a.unsafe_buffer_pointer() == t.data_ptr()
        back = ct.to_torch(a)
        assert back.device == t.device and back.data_ptr() == t.data_ptr()
        device = client.devices()[[d.local_hardware_id for d in client.devices()].index(last)]
        mesh = cuxla.Mesh([device], ["x"])
        (doubled,) = cuxla.compile(SCALE, client=client, mesh=mesh).call_sharded([cuxla.shard([t], mesh, [None])])
        out = ct.to_torch(doubled.shards[0])
        assert out.device == t.device
        assert torch.equal(out.cpu(), 2 * torch.arange(1024, dtype=torch.float32))


def test_another_gpu_asked_for_copies_or_refuses():
    client = cuxla._client.client_for_platform("cuda")
    other = next(d for d in client.devices() if d.local_hardware_id == 1)
    t = torch.arange(1024, dtype=torch.float32, device="cuda:0")
    moved = cuxla.from_dlpack(t, device=other)
    assert moved.device.local_hardware_id == 1 and not moved.is_view
    assert np.array_equal(moved.numpy(), np.arange(1024, dtype=np.float32))
    with pytest.raises(BufferError, match="on cuda:0, not on the requested cuda device"):
        cuxla.from_dlpack(t, device=other, copy=False)


REMAPPED = """
import torch, cuxla, cuxla.torch as ct
t = torch.arange(16.0, device="cuda:0")   # physical GPU 1 under CUDA_VISIBLE_DEVICES=1,0
a = cuxla.from_dlpack(t)
assert a.device.local_hardware_id == 0, a.device.local_hardware_id
assert a.unsafe_buffer_pointer() == t.data_ptr()
assert ct.to_torch(a).data_ptr() == t.data_ptr()
print("remapped ok", torch.cuda.get_device_properties(0).pci_bus_id)
"""


def test_cuda_visible_devices_remapping_keeps_tensors_on_their_gpu():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="1,0")
    result = subprocess.run([sys.executable, "-c", REMAPPED], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "remapped ok" in result.stdout
    print(result.stdout.strip())


def test_spmd_over_every_gpu_splits_and_all_reduces():
    client = cuxla._client.client_for_platform("cuda")
    mesh = cuxla.Mesh(client.devices(), ["data"])
    n = len(mesh.devices)
    program = f"""
module @m attributes {{mhlo.num_partitions = {n} : i32, mhlo.num_replicas = 1 : i32}} {{
func.func public @main(%x: tensor<{8 * n}x16xf32> {{mhlo.sharding = "{mesh.hlo_sharding(['data', None])}"}})
    -> (tensor<16xf32> {{mhlo.sharding = "{{replicated}}"}}) {{
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<{8 * n}x16xf32>, tensor<f32>) -> tensor<16xf32>
  return %s : tensor<16xf32>
}}
}}"""
    exe = cuxla.compile(program, client=client, mesh=mesh)
    parts = [torch.full((8, 16), float(i + 1), device=f"cuda:{d.local_hardware_id}") for i, d in enumerate(mesh.devices)]
    (total,) = exe.call_sharded([cuxla.shard(parts, mesh, ["data", None])])
    expected = 8 * sum(range(1, n + 1))
    for shard in total.shards:  # XLA's all-reduce (NCCL) over the GPUs
        np.testing.assert_array_equal(shard.numpy(), np.full(16, expected, np.float32))
