"""Many threads importing, exporting and executing at once; a soak of mixed
import/export/delete cycles with flat memory."""
import concurrent.futures
import os
import time

import numpy as np
import pytest
import torch

import cuxla
import cuxla.torch as ct
from cuxla import _torch_memory

AXPY = """
func.func public @main(%a: tensor<f32>, %x: tensor<256xf32>, %y: tensor<256xf32>) -> tensor<256xf32> {
  %ab = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<256xf32>
  %ax = stablehlo.multiply %ab, %x : tensor<256xf32>
  %out = stablehlo.add %ax, %y : tensor<256xf32>
  return %out : tensor<256xf32>
}
"""


@pytest.fixture
def tdev(client):
    return "cuda" if client.platform == "cuda" else "cpu"


def test_16_threads_import_export_and_execute_correctly(client, tdev):
    axpy = cuxla.compile(AXPY, client=client)

    def work(thread: int) -> int:
        wrong = 0
        for i in range(200):
            a = torch.tensor(float(thread), device=tdev)
            x = torch.full((256,), float(i), device=tdev)
            y = torch.arange(256.0, device=tdev)
            (out,) = ct.call(axpy, a, x, y)
            wrong += int(not torch.equal(out, thread * x + y))
            back = ct.to_torch(cuxla.from_dlpack(x))
            wrong += int(back.data_ptr() != x.data_ptr())
        return wrong

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(work, range(16)))
    assert sum(results) == 0, results


def _rss() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


SOAK_CYCLES = int(os.environ.get("CUXLA_SOAK_CYCLES", "100000"))


def test_soak_of_mixed_dtypes_ranks_and_layouts_keeps_memory_flat(client, tdev):
    rng = np.random.default_rng(0)
    dtypes = [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64, torch.uint8]
    shapes = [(), (7,), (3, 5), (2, 3, 4), (0, 3)]
    tensors = []
    for dtype in dtypes:
        for shape in shapes:
            t = torch.zeros(shape, dtype=dtype, device=tdev)
            tensors += [t, t.T if t.ndim == 2 else t, t[..., ::2] if t.ndim >= 1 and t.shape[-1] > 1 else t]

    def cycle(i, t):
        a = cuxla.from_dlpack(t)
        back = ct.to_torch(a)
        if i % 3 == 0:
            a.delete()
        del a, back

    def cycles(n, report_every=100_000):
        start = time.perf_counter()
        for i in range(n):
            cycle(i, tensors[int(rng.integers(len(tensors)))])
            if (i + 1) % report_every == 0:
                print(f"  {i + 1} cycles in {time.perf_counter() - start:.1f} s, host RSS {_rss() / 2**20:.1f} MiB",
                      flush=True)

    # Every kind once first, timed (a first strided copy compiles its program).
    for k, t in enumerate(tensors):
        start = time.perf_counter()
        cycle(k, t)
        if time.perf_counter() - start > 1.0:
            print(f"  first cycle of {t.dtype} {tuple(t.shape)} strides {t.stride()}: "
                  f"{time.perf_counter() - start:.1f} s", flush=True)

    def xla_in_use():  # the strided tensors' compact copies live in XLA's memory
        return (client.memory_stats() or {}).get("bytes_in_use") if tdev == "cuda" else None

    cycles(2000)
    before = _rss()
    allocated = _torch_memory.torch_memory_allocated() if tdev == "cuda" else 0
    xla_before = xla_in_use()
    cycles(SOAK_CYCLES)
    growth = _rss() - before
    print(f"{SOAK_CYCLES} cycles: host RSS {before / 2**20:.1f} -> {_rss() / 2**20:.1f} MiB"
          + (f", torch {allocated} -> {_torch_memory.torch_memory_allocated()} B, XLA {xla_before} -> {xla_in_use()} B"
             if tdev == "cuda" else ""))
    assert growth < 32 * 2**20, f"host RSS grew {growth / 2**20:.1f} MiB over {SOAK_CYCLES} cycles"
    if tdev == "cuda":
        assert _torch_memory.torch_memory_allocated() == allocated
        assert xla_in_use() == xla_before


def test_deleting_an_array_while_other_threads_execute_on_it(client, tdev):
    # Each call either ran on the array (right result) or found it deleted.
    axpy = cuxla.compile(AXPY, client=client)
    a = cuxla.from_dlpack(torch.tensor(2.0, device=tdev))
    y = cuxla.from_dlpack(torch.zeros(256, device=tdev))
    outcomes = {"ran": 0, "deleted": 0, "wrong": 0}

    def work(_):
        for _ in range(300):
            x = cuxla.from_dlpack(torch.ones(256, device=tdev))
            try:
                (out,) = axpy(a, x, y)
            except RuntimeError as error:
                assert "deleted" in str(error)
                outcomes["deleted"] += 1
                continue
            outcomes["ran"] += 1
            outcomes["wrong"] += int(not np.all(out.numpy() == 2.0))

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(work, i) for i in range(8)]
        while outcomes["ran"] < 50:
            pass
        a.delete()
        for f in futures:
            f.result()
    assert outcomes["wrong"] == 0 and outcomes["ran"] >= 50 and outcomes["deleted"] > 0, outcomes
