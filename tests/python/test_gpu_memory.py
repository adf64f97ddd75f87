"""XLA and PyTorch sharing one GPU: a default CUDA client leaves the memory to PyTorch."""
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
