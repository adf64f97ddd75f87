"""One memory pool for PyTorch and XLA: PyTorch's CUDA allocations from the
pool XLA's "cuda_async" allocator draws from, for the whole process or a
torch.cuda.MemPool. The GPU tests run each in a fresh process (PyTorch's
allocator can be swapped only before its first CUDA allocation)."""
import ctypes
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import cuxla  # noqa: E402
import cuxla.torch as ct  # noqa: E402
from cuxla import _cuxla  # noqa: E402

GPU = torch.cuda.is_available() and _cuxla.cuda_driver()["available"]
needs_gpu = pytest.mark.skipif(not GPU, reason="needs a CUDA GPU (run by scripts/gpu-check)")


def test_pytorch_finds_the_allocator_functions_in_the_extension():
    library = ctypes.CDLL(_cuxla.__file__)
    for name in ("cuxla_torch_malloc", "cuxla_torch_malloc_for_mem_pool", "cuxla_torch_free",
                 "cuxla_torch_record_stream", "cuxla_torch_empty_cache"):
        assert ctypes.cast(getattr(library, name), ctypes.c_void_p).value, name
    # Nothing to allocate for an empty tensor, and nothing to free for it.
    library.cuxla_torch_malloc_for_mem_pool.restype = ctypes.c_void_p
    assert library.cuxla_torch_malloc_for_mem_pool(ctypes.c_size_t(0), 0, None) is None
    library.cuxla_torch_free(None, ctypes.c_size_t(0), 0, None)


@pytest.mark.skipif(GPU, reason="what a machine without a GPU says")
@pytest.mark.parametrize("ask", [ct.use_xla_allocator, ct.xla_allocator, ct.memory_pool_stats])
def test_without_a_gpu_each_asks_says_why_in_one_sentence(ask):
    with pytest.raises((cuxla.NoDeviceError, RuntimeError)) as raised:
        ask()
    message = str(raised.value)
    assert "\n" not in message and ("GPU" in message or "CUDA driver" in message), message
    assert not ct.uses_xla_allocator()


def _run(script: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@needs_gpu
def test_the_whole_process_allocates_from_xlas_pool_zero_copy():
    print(_run("""
        import torch, cuxla, cuxla.torch as ct
        from cuxla import _models
        ct.use_xla_allocator()
        ct.use_xla_allocator()  # a second call changes nothing
        assert ct.uses_xla_allocator()
        assert cuxla._client.client_for_platform("cuda").options["allocator"] == "cuda_async"
        before = ct.memory_pool_stats()
        x = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
        grown = ct.memory_pool_stats()
        assert grown["torch_bytes"] - before["torch_bytes"] == x.nbytes, (before, grown)
        assert grown["used_bytes"] - before["used_bytes"] >= x.nbytes, (before, grown)
        # XLA reads PyTorch's block in place, and writes its output in the same pool.
        assert ct.to_xla(x).unsafe_buffer_pointer() == x.data_ptr()
        add_one = cuxla.compile('''
        func.func public @main(%x: tensor<1048576xf32>) -> tensor<1048576xf32> {
          %one = stablehlo.constant dense<1.0> : tensor<1048576xf32>
          %0 = stablehlo.add %x, %one : tensor<1048576xf32>
          return %0 : tensor<1048576xf32>
        }''', client="cuda")
        (y,) = ct.call(add_one, x)
        after = ct.memory_pool_stats()
        assert after["xla_bytes"] >= y.nbytes and after["torch_bytes"] == grown["torch_bytes"], after
        x[0] = 41.0
        (z,) = ct.call(add_one, x)
        assert z[0].item() == 42.0 and z[5].item() == 6.0
        # Compiled training on one pool trains as eager does.
        eager = _models.train(_models.mlp("cuda"), 5)
        compiled = _models.train(_models.mlp("cuda"), 5, compile_backend="cuxla")
        worst = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(eager, compiled))
        assert worst < 1e-3, (eager, compiled)
        # What either runtime freed stays in the pool until empty_cache gives it back.
        del x, y, z
        block = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        del block
        torch.cuda.synchronize()
        held = ct.memory_pool_stats()
        assert held["reserved_bytes"] - held["used_bytes"] >= 1 << 30, held
        torch.cuda.empty_cache()
        trimmed = ct.memory_pool_stats()
        assert held["reserved_bytes"] - trimmed["reserved_bytes"] >= 1 << 30, (held, trimmed)
        print("pool", held, "->", trimmed)
    """))


@needs_gpu
def test_the_allocator_swapped_too_late_is_refused_in_one_sentence():
    _run("""
        import torch, cuxla.torch as ct
        torch.zeros(1, device="cuda")
        try:
            ct.use_xla_allocator()
        except RuntimeError as error:
            assert "before PyTorch's first CUDA allocation" in str(error), error
        else:
            raise AssertionError("swapped an allocator in use")
        assert not ct.uses_xla_allocator()
    """)


@needs_gpu
def test_out_of_memory_names_both_runtimes():
    print(_run("""
        import torch, cuxla.torch as ct
        ct.use_xla_allocator()
        total = torch.cuda.mem_get_info()[1]
        try:
            torch.empty(2 * total, dtype=torch.uint8, device="cuda")
        except RuntimeError as error:
            message = str(error)
            assert "out of memory" in message and "PyTorch" in message and "XLA" in message, message
            print(message.splitlines()[0])
        else:
            raise AssertionError("allocated twice the card")
        torch.ones(16, device="cuda").sum().item()  # and the process goes on
    """))


@needs_gpu
def test_a_mem_pool_scope_allocates_from_xlas_pool():
    print(_run("""
        import gc, torch, cuxla.torch as ct
        pool = torch.cuda.MemPool(ct.xla_allocator().allocator())
        gc.collect()  # the pool keeps a bare pointer to the allocator: it must live on without the caller
        assert ct.xla_allocator() is ct.xla_allocator()
        outside = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
        before = ct.memory_pool_stats()["torch_bytes"]
        with torch.cuda.use_mem_pool(pool):
            inside = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        assert ct.memory_pool_stats()["torch_bytes"] - before >= inside.nbytes
        total = torch.cuda.mem_get_info()[1]
        with torch.cuda.use_mem_pool(pool):
            try:
                torch.empty(2 * total, dtype=torch.uint8, device="cuda")
            except torch.OutOfMemoryError as error:
                print(str(error).splitlines()[0])
            else:
                raise AssertionError("allocated twice the card")
    """))


@needs_gpu
def test_a_block_used_on_another_stream_is_reused_only_after_that_streams_work():
    # x is read on `side` after a long wait there; freed on its own stream at
    # once, its memory would be zeroed by the next allocation before the read.
    _run("""
        import torch, cuxla.torch as ct
        ct.use_xla_allocator()
        main, side = torch.cuda.current_stream(), torch.cuda.Stream()
        x = torch.full((1 << 22,), 3.0, device="cuda")
        side.wait_stream(main)
        with torch.cuda.stream(side):
            torch.cuda._sleep(200_000_000)  # about 0.1 s of the GPU's time
            y = x * 2
        x.record_stream(side)
        del x
        z = torch.zeros(1 << 22, device="cuda")  # the pool's next block of that size
        main.wait_stream(side)
        assert torch.equal(y, torch.full_like(y, 6.0)), y[:4]
    """)
