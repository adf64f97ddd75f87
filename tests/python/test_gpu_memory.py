"""XLA and PyTorch sharing one GPU: a default CUDA client leaves the memory to
PyTorch, and so does compiled training (no JAX client is ever made), in one
process or several side by side."""
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

SHARE = textwrap.dedent("""
    import numpy as np, torch, cuxla
    free_before, total = torch.cuda.mem_get_info()
    client = cuxla.Client("cuda")
    x = cuxla.asarray(np.ones((1024, 1024), np.float32), client=client)
    (y,) = cuxla.compile('''
    func.func public @main(%x: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
      %0 = stablehlo.add %x, %x : tensor<1024x1024xf32>
      return %0 : tensor<1024x1024xf32>
    }''', client=client)(x)
    assert float(y.numpy()[0, 0]) == 2.0
    free_after, _ = torch.cuda.mem_get_info()
    block = torch.empty(int(0.9 * free_before), dtype=torch.uint8, device="cuda")
    block[-1] = 7
    torch.cuda.synchronize()
    print(f"total={total} free_before={free_before} free_after_xla={free_after} "
          f"torch_allocated={block.numel()} xla_in_use={client.memory_stats()['bytes_in_use']}")
""")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run by scripts/gpu-check)")
def test_torch_allocates_90_percent_of_free_memory_beside_a_cuda_client(client):
    if client.platform != "cuda":
        pytest.skip("the CUDA client is tested once, under its own platform")
    # A fresh process: the numbers must not depend on other tests' allocations.
    result = subprocess.run([sys.executable, "-c", SHARE], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    print(result.stdout)


# Compiled training in a process the suite's settings do not touch (no
# XLA_PYTHON_CLIENT_PREALLOCATE): JAX must have made no client at all, and
# on CUDA, for a process alone on the card, the memory PyTorch sees free
# afterwards is what was free before, less XLA's live buffers, less 5% of
# the card (beside others, their memory moves the device's free memory too).
TRAIN = textwrap.dedent("""
    import sys, torch, cuxla, cuxla.dynamo
    from cuxla import _models
    device, alone = sys.argv[1], sys.argv[2] == "alone"
    cuda = device == "cuda"
    if cuda:
        torch.cuda.init()
        free_before, total = torch.cuda.mem_get_info()
    losses = _models.train(_models.mlp(device, "base" if cuda else "tiny"), 3, compile_backend="cuxla")
    report = cuxla.dynamo.report()
    assert report["xla_ops"] == report["aten_ops"] > 0, report
    from jax._src import xla_bridge
    assert not xla_bridge._backends, f"JAX made clients: {sorted(xla_bridge._backends)}"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        free_after, _ = torch.cuda.mem_get_info()
        xla_live = cuxla._client.client_for_platform("cuda").memory_stats()["bytes_in_use"]
        print(f"free before {free_before / 2**30:.2f} GiB, after {free_after / 2**30:.2f} GiB, "
              f"XLA live {xla_live / 2**30:.3f} GiB of {total / 2**30:.1f} GiB")
        assert free_after >= free_before - xla_live - 0.05 * total or not alone
    print("losses", losses)
""")


def _clean_environment() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(("XLA_PYTHON_CLIENT", "JAX_"))}


def test_compiled_training_makes_no_jax_client_and_leaves_memory_free(client):
    device = "cuda" if client.platform == "cuda" else "cpu"
    result = subprocess.run([sys.executable, "-c", TRAIN, device, "alone"], capture_output=True, text=True, timeout=600,
                            env=_clean_environment())
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    print(result.stdout)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run by scripts/gpu-check)")
@pytest.mark.parametrize("processes", [2, 4])
def test_processes_training_side_by_side_on_one_gpu_all_finish(client, processes):
    if client.platform != "cuda":
        pytest.skip("the CUDA client is tested once, under its own platform")
    runs = [subprocess.Popen([sys.executable, "-c", TRAIN, "cuda", "beside others"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=_clean_environment())
            for _ in range(processes)]
    outputs = [run.communicate(timeout=900) for run in runs]
    failed = [(run.returncode, err[-2000:]) for run, (_, err) in zip(runs, outputs) if run.returncode != 0]
    assert not failed, failed
