"""Meshes, sharded arrays and SPMD execution: on the CPU plugin's several
devices in CI, on every GPU of the machine under CUDA (one on the H200 the
device tool lends: there the same programs run with one partition)."""
import copy

import numpy as np
import pytest
import torch

import cuxla
import cuxla.torch as ct
from cuxla import _models
from cuxla.parallel import DataParallel

# Four partitions on the CPU plugin's devices; under CUDA, as many as there
# are GPUs, up to four.
PARTITIONS = 4


@pytest.fixture(scope="module")
def spmd_client():
    import os

    wanted = os.environ.get("CUXLA_TEST_PLATFORMS", "")
    if "cuda" in wanted:
        return cuxla._client.client_for_platform("cuda")
    return cuxla.Client("cpu", device_count=PARTITIONS)


@pytest.fixture
def mesh(spmd_client):
    return cuxla.Mesh(spmd_client.devices()[:PARTITIONS], ["data"])


def _tdev(client):
    return "cuda" if client.platform == "cuda" else "cpu"


SPLIT_PRODUCT = """
module @m attributes {{mhlo.num_partitions = {n} : i32, mhlo.num_replicas = 1 : i32}} {{
func.func public @main(%x: tensor<{rows}x16xf32> {{mhlo.sharding = "{split}"}},
                       %w: tensor<16x16xf32> {{mhlo.sharding = "{whole}"}})
    -> (tensor<{rows}x16xf32> {{mhlo.sharding = "{split}"}}, tensor<16x16xf32> {{mhlo.sharding = "{whole}"}}) {{
  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<{rows}x16xf32>, tensor<16x16xf32>) -> tensor<{rows}x16xf32>
  %g = stablehlo.dot_general %x, %y, contracting_dims = [0] x [0], precision = [HIGHEST, HIGHEST] : (tensor<{rows}x16xf32>, tensor<{rows}x16xf32>) -> tensor<16x16xf32>
  return %y, %g : tensor<{rows}x16xf32>, tensor<16x16xf32>
}}
}}
"""


def _split_product(mesh):
    n = len(mesh.devices)
    return SPLIT_PRODUCT.format(n=n, rows=8 * n, split=mesh.hlo_sharding(["data", None]),
                                whole=mesh.hlo_sharding([None, None]))


def test_mesh_describes_its_devices_and_shardings(spmd_client, mesh):
    assert mesh.shape == (len(mesh.devices),)
    assert mesh.axis_names == ["data"]
    assert mesh.hlo_sharding([None, None]) == "{replicated}"
    if len(mesh.devices) > 1:
        assert mesh.hlo_sharding(["data", None]) == f"{{devices=[{len(mesh.devices)},1]<=[{len(mesh.devices)}]}}"
    with pytest.raises(ValueError, match="no axis 'model'"):
        mesh.hlo_sharding(["model", None])
    with pytest.raises(ValueError, match="needs 3 devices"):
        cuxla.Mesh(spmd_client.devices()[:1], ["a"], shape=[3])


def test_shards_of_torch_tensors_are_zero_copy_and_export_back(spmd_client, mesh):
    tdev = _tdev(spmd_client)
    n = len(mesh.devices)
    whole = torch.arange(8 * n * 16, dtype=torch.float32, device=tdev).reshape(8 * n, 16)
    parts = list(whole.chunk(n))  # 512-byte rows blocks: aligned views
    x = cuxla.shard(parts, mesh, ["data", None])
    assert x.shape == (8 * n, 16) and x.tiles == (n, 1)
    assert x.tile_index == [(i, 0) for i in range(n)]
    for part, shard, device in zip(parts, x.shards, mesh.devices):
        assert shard.is_view and shard.unsafe_buffer_pointer() == part.data_ptr()
        assert shard.device == device
        back = ct.to_torch(shard)
        assert back.data_ptr() == part.data_ptr()
    parts[-1][0, 0] = -1.0  # a write in torch is seen through the shard
    assert x.shards[-1].numpy()[0, 0] == -1.0


def test_spmd_program_on_sharded_torch_tensors_matches_numpy(spmd_client, mesh):
    tdev = _tdev(spmd_client)
    n = len(mesh.devices)
    exe = cuxla.compile(_split_product(mesh), client=spmd_client, mesh=mesh)
    assert exe.num_partitions == n
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((8 * n, 16), dtype=np.float32)).to(tdev)
    w = torch.from_numpy(rng.standard_normal((16, 16), dtype=np.float32)).to(tdev)
    y, g = exe.call_sharded([cuxla.shard(x.chunk(n), mesh, ["data", None]), cuxla.shard([w] * n, mesh, [None, None])])
    assert y.shape == (8 * n, 16) and y.tiles == (n, 1)
    assert g.shape == (16, 16) and g.tiles == (1, 1)
    xs, ws = x.cpu().double().numpy(), w.cpu().double().numpy()
    np.testing.assert_allclose(np.concatenate([s.numpy() for s in y.shards]), xs @ ws, rtol=1e-4, atol=1e-4)
    for replica in g.shards:  # the all-reduce over the partitions' rows
        np.testing.assert_allclose(replica.numpy(), xs.T @ (xs @ ws), rtol=1e-4, atol=1e-3)


def test_an_argument_split_otherwise_than_the_program_takes_it_is_refused(spmd_client, mesh):
    n = len(mesh.devices)
    if n == 1:
        pytest.skip("with one partition every split is the whole array")
    exe = cuxla.compile(_split_product(mesh), client=spmd_client, mesh=mesh)
    tdev = _tdev(spmd_client)
    w = cuxla.shard([torch.ones(16, 16, device=tdev)] * n, mesh, [None, None])
    whole = cuxla.shard([torch.ones(8 * n, 16, device=tdev)] * n, mesh, [None, None])
    with pytest.raises(ValueError, match=r"argument 0 is split in tiles \(1, 1\)"):
        exe.call_sharded([whole, w])
    with pytest.raises(ValueError, match="2 shards given for a mesh of 1 devices"):
        cuxla.shard([torch.ones(2)] * 2, cuxla.Mesh(spmd_client.devices()[:1], ["a"]), [None])


@pytest.mark.parametrize("name", ["mlp", "bert"])
def test_data_parallel_sgd_equals_one_device_and_eager(spmd_client, mesh, name):
    tdev = _tdev(spmd_client)
    workload = _models.WORKLOADS[name](tdev, "tiny")
    steps, lr = 5, 0.1
    one = cuxla.Mesh(spmd_client.devices()[:1], ["data"])
    losses = {}
    for label, m in (("mesh", mesh), ("one device", one)):
        # No client=: the mesh's devices say which client compiles (it is not the platform's default).
        dp = DataParallel(copy.deepcopy(workload.model), workload.loss, m, lr=lr, example_batch=workload.batch)
        losses[label] = [dp.step(workload.batch).item() for _ in range(steps)]
        params = dict(dp.named_parameters())
        assert [p.data_ptr() for p in dp.parameters()] == [p.data_ptr() for p in params.values()]
    eager = copy.deepcopy(workload.model)
    optimizer = torch.optim.SGD(eager.parameters(), lr=lr)
    reference = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = workload.loss(eager, workload.batch)
        loss.backward()
        optimizer.step()
        reference.append(loss.item())
    print(f"{name} over {len(mesh.devices)} partitions: {losses['mesh']}; one device {losses['one device']}; "
          f"eager {reference}")
    np.testing.assert_allclose(losses["mesh"], losses["one device"], rtol=1e-5)
    np.testing.assert_allclose(losses["mesh"], reference, rtol=1e-4)
    assert reference[-1] < reference[0]
    for key, value in eager.named_parameters():
        np.testing.assert_allclose(params[key].cpu().numpy(), value.detach().cpu().numpy(), rtol=1e-3, atol=1e-4)


def test_data_parallel_over_a_two_axis_mesh_splits_the_batch_along_the_first(spmd_client):
    if len(spmd_client.devices()) < 4:
        pytest.skip("needs four devices for a 2 x 2 mesh")
    workload = _models.WORKLOADS["mlp"](_tdev(spmd_client), "tiny")
    losses = []
    for mesh in (cuxla.Mesh(spmd_client.devices()[:4], ["data", "model"], shape=[2, 2]),
                 cuxla.Mesh(spmd_client.devices()[:1], ["data"])):
        dp = DataParallel(copy.deepcopy(workload.model), workload.loss, mesh, lr=0.1,
                          example_batch=workload.batch, client=spmd_client)
        losses.append([dp.step(workload.batch).item() for _ in range(3)])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)
