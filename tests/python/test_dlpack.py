"""DLPack import and export: zero-copy (pointer identity and mutation), layouts,
dtypes, alignment, capsules and lifetimes — against PyTorch and NumPy."""
import gc
import os
import time
import weakref
from typing import Callable

import ml_dtypes  # noqa: F401
import numpy as np
import pytest
import torch

import cuxla
import cuxla.torch as ct
from cuxla import _cuxla, _torch_memory

@pytest.fixture
def tdev(client):
    """The torch device matching the client's platform."""
    return "cuda" if client.platform == "cuda" else "cpu"


def test_import_is_a_view_of_the_same_memory(tdev):
    t = torch.arange(12, dtype=torch.float32, device=tdev).reshape(3, 4)
    a = cuxla.from_dlpack(t)
    assert a.is_view
    assert a.unsafe_buffer_pointer() == t.data_ptr()
    assert a.shape == (3, 4) and a.dtype == np.float32


def test_a_write_in_torch_is_seen_by_xla(tdev):
    t = torch.zeros(4, device=tdev)
    a = cuxla.from_dlpack(t)
    t[2] = 7.0
    assert a.numpy().tolist() == [0.0, 0.0, 7.0, 0.0]


def test_a_tensor_that_requires_grad_is_imported_as_its_data(tdev):
    weight = torch.nn.Parameter(torch.arange(4.0, device=tdev))
    a = cuxla.from_dlpack(weight)  # through PyTorch's exchange API, as t.detach() would be
    assert a.is_view and a.unsafe_buffer_pointer() == weight.data_ptr()
    with torch.no_grad():
        weight.mul_(2)
    assert a.numpy().tolist() == [0.0, 2.0, 4.0, 6.0]
    # Reached through __dlpack__, PyTorch itself refuses it, and cuxla lets that refusal through.

    class Protocol:
        def __dlpack__(self, **kwargs):
            return weight.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return weight.__dlpack_device__()

    with pytest.raises(BufferError, match="require gradient"):
        cuxla.from_dlpack(Protocol())


def test_export_is_the_same_memory_and_writes_are_shared(tdev):
    a = cuxla.asarray(np.arange(6, dtype=np.float32))
    if tdev == "cuda":
        a = cuxla.from_dlpack(torch.arange(6, dtype=torch.float32, device="cuda"))
    t = ct.to_torch(a)
    assert t.data_ptr() == a.unsafe_buffer_pointer()
    t[0] = 42.0
    assert a.numpy()[0] == 42.0


def test_exported_tensor_outlives_the_array(client):
    a = cuxla.asarray(np.arange(1000, dtype=np.int64) * 3, client=client)
    out = ct.to_torch(a)
    a.delete()
    gc.collect()
    # Were the memory freed, these would likely take it over.
    others = [cuxla.asarray(np.full(1000, -1, np.int64), client=client) for _ in range(16)]
    assert torch.equal(out.cpu(), torch.arange(1000, dtype=torch.int64) * 3)
    del others


_ELEMENTWISE = """
func.func public @main(%x: tensor<{n}x{t}>, %y: tensor<{n}x{t}>) -> tensor<{n}x{t}> {{
  %0 = stablehlo.{op} %x, %y : tensor<{n}x{t}>
  return %0 : tensor<{n}x{t}>
}}
"""


@pytest.mark.parametrize("make", [
    lambda d: torch.tensor(3.5, device=d),
    lambda d: torch.zeros(0, 3, device=d),
    lambda d: torch.zeros(2, 0, 4, device=d),
], ids=["rank0", "size0", "size0-3d"])
def test_rank_zero_and_empty_tensors_both_ways(tdev, make):
    t = make(tdev)
    a = cuxla.from_dlpack(t)
    assert a.shape == tuple(t.shape)
    back = ct.to_torch(a)
    assert back.shape == t.shape and torch.equal(back.cpu(), t.cpu())
    if t.numel():
        assert a.is_view and a.unsafe_buffer_pointer() == t.data_ptr()


@pytest.mark.parametrize("view, layout", [
    (lambda t: t.T, (0, 1)),
    (lambda t: t.reshape(2, 3, 2).permute(2, 0, 1), (0, 2, 1)),
    (lambda t: t.reshape(1, 3, 2, 2).contiguous(memory_format=torch.channels_last), (1, 3, 2, 0)),
], ids=["transpose", "permute-201", "channels-last"])
def test_permuted_strides_are_zero_copy_views_with_an_xla_layout(tdev, view, layout):
    base = torch.arange(12, dtype=torch.float32, device=tdev).reshape(3, 4)
    t = view(base)
    a = cuxla.from_dlpack(t, copy=False)
    assert a.is_view and a.layout == layout
    assert a.unsafe_buffer_pointer() == t.data_ptr()
    assert np.array_equal(a.numpy(), t.cpu().numpy())


def test_program_on_a_permuted_view_equals_on_a_contiguous_copy(client, tdev):
    t = torch.randn(4, 2, 3, device=tdev).permute(2, 0, 1)  # shape (3, 4, 2), not row-major
    program = cuxla.compile(_ELEMENTWISE.format(n="3x4x2", t="f32", op="multiply"), client=client)
    (on_view,) = program(t, t)
    c = t.contiguous()
    (on_copy,) = program(c, c)
    assert np.array_equal(on_view.numpy(), on_copy.numpy())
    assert np.allclose(on_view.numpy(), (t * t).cpu().numpy())


@pytest.mark.parametrize("make", [
    lambda t: t[:, ::2],
    lambda t: t[0].expand(3, 4),
], ids=["step", "broadcast"])
def test_strides_xla_cannot_view_are_copied_or_refused(tdev, make):
    base = torch.arange(12, dtype=torch.float32, device=tdev).reshape(3, 4)
    t = make(base)
    a = cuxla.from_dlpack(t)
    assert np.array_equal(a.numpy(), t.cpu().numpy())
    assert not a.is_view
    with pytest.raises(BufferError, match=r"shape \(3, \d\) and strides \(.*\) \(steps, broadcasts"):
        cuxla.from_dlpack(t, copy=False)


def test_negative_strides_are_copied_or_refused(client):
    if client.platform != "cpu":
        pytest.skip("PyTorch has no negative strides; NumPy arrays are host memory")
    n = np.arange(12, dtype=np.int32).reshape(3, 4)[::-1, ::-2]
    a = cuxla.from_dlpack(n)
    assert not a.is_view and np.array_equal(a.numpy(), n)
    with pytest.raises(BufferError, match=r"strides \(-4, -2\)"):
        cuxla.from_dlpack(n, copy=False)


def test_copy_true_always_copies(tdev):
    t = torch.arange(4.0, device=tdev)
    a = cuxla.from_dlpack(t, copy=True)
    assert not a.is_view and a.unsafe_buffer_pointer() != t.data_ptr()
    t[0] = 9.0
    assert a.numpy()[0] == 0.0


def test_another_cpu_device_views_the_same_host_memory():
    # Host memory is every CPU device's: device= another CPU device of the
    # client is no move, so a view there (elsewhere, as on another GPU or
    # platform, copies or refuses: test_cuda.py, test_multi_gpu.py).
    if not cuxla._cuxla.find_plugin("cpu", cuxla._client.package_dirs())[0]:
        pytest.skip("needs the CPU plugin")
    second = cuxla.Client("cpu", device_count=2).devices()[1]
    t = torch.arange(6.0)
    a = cuxla.from_dlpack(t, device=second, copy=False)
    assert a.is_view and a.device.id == 1 and a.unsafe_buffer_pointer() == t.data_ptr()
    t[0] = 9.0
    assert a.numpy()[0] == 9.0


def test_misaligned_pointer_is_copied_not_viewed(client, tdev):
    t = torch.arange(40, dtype=torch.uint8, device=tdev)[1:]  # one byte in
    a = cuxla.from_dlpack(t)
    assert not a.is_view and a.numpy().tolist() == list(range(1, 40))
    alignment = _cuxla._buffer_alignment(client.platform)
    with pytest.raises(BufferError, match=rf"at address {hex(t.data_ptr())} is not aligned to {alignment} bytes"):
        cuxla.from_dlpack(t, copy=False)


def test_numpy_memory_is_refused_for_its_alignment_in_hex(client):
    if client.platform != "cpu":
        pytest.skip("NumPy arrays live in host memory")
    n = cuxla.asalignedarray(np.arange(17, dtype=np.float32))[1:]  # 4 bytes past 64
    with pytest.raises(BufferError, match=rf"at address {hex(n.ctypes.data)} is not aligned to 64 bytes"):
        cuxla.from_dlpack(n, copy=False)


def test_aligned_numpy_array_is_a_view(client):
    if client.platform != "cpu":
        pytest.skip("NumPy arrays live in host memory")
    n = cuxla.asalignedarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    a = cuxla.from_dlpack(n, copy=False)
    assert a.is_view and a.unsafe_buffer_pointer() == n.ctypes.data
    n[1, 2] = -1.0
    assert a.numpy()[1, 2] == -1.0


def test_transposed_numpy_array_is_a_view_in_its_layout(client):
    # A transpose is a layout XLA views: only misalignment refuses it.
    if client.platform != "cpu":
        pytest.skip("NumPy arrays live in host memory")
    n = cuxla.asalignedarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    a = cuxla.from_dlpack(n.T, copy=False)
    assert a.is_view and a.unsafe_buffer_pointer() == n.ctypes.data and a.layout == (0, 1)
    n[0, 1] = -1.0
    assert np.array_equal(a.numpy(), n.T)
    misaligned = cuxla.asalignedarray(np.arange(13, dtype=np.float32))[1:].reshape(3, 4)
    with pytest.raises(BufferError, match=rf"at address {hex(misaligned.ctypes.data)} is not aligned to 64 bytes"):
        cuxla.from_dlpack(misaligned.T, copy=False)


def test_strides_xla_cannot_view_are_named_before_alignment(client):
    if client.platform != "cpu":
        pytest.skip("NumPy arrays live in host memory")
    n = cuxla.asalignedarray(np.arange(33, dtype=np.float32))[1::2]  # misaligned and stepped
    with pytest.raises(BufferError, match=r"shape \(16,\) and strides \(2,\)"):
        cuxla.from_dlpack(n, copy=False)


TORCH_DTYPES = [torch.bool, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
                torch.uint16, torch.uint32, torch.uint64, torch.float16, torch.bfloat16,
                torch.float32, torch.float64, torch.complex64, torch.complex128,
                torch.float8_e5m2, torch.float8_e4m3fn, torch.float8_e5m2fnuz, torch.float8_e4m3fnuz]


@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=str)
def test_every_dtype_round_trips_bit_exact_and_zero_copy(tdev, dtype):
    raw = torch.randint(0, 256, (4, 8 * dtype.itemsize), dtype=torch.uint8)
    if dtype == torch.bool:
        raw &= 1
    t = raw.view(dtype).to(tdev)
    a = cuxla.from_dlpack(t)
    assert a.is_view and a.unsafe_buffer_pointer() == t.data_ptr()
    back = ct.to_torch(a)
    assert back.dtype == dtype and back.data_ptr() == t.data_ptr()
    assert torch.equal(back.view(torch.uint8).cpu(), t.view(torch.uint8).cpu())
    assert a.numpy().tobytes() == t.cpu().view(torch.uint8).numpy().tobytes()


def test_float64_is_computed_in_float64(client, tdev):
    t = torch.tensor([1.0 + 2.0**-40, 1.0], dtype=torch.float64, device=tdev)
    (out,) = ct.call(cuxla.compile(_ELEMENTWISE.format(n=2, t="f64", op="subtract"), client=client), t, t.flip(0).contiguous())
    assert out.dtype == torch.float64 and out[0].item() == 2.0**-40


def test_call_takes_arrays_and_tensors_together_and_releases_views_of_a_failed_call(client, tdev):
    add = cuxla.compile(_ELEMENTWISE.format(n=6, t="f32", op="add"), client=client)
    t = torch.arange(6.0, device=tdev)
    a = cuxla.from_dlpack(torch.ones(6, device=tdev))
    for args in ((a, t), (t, a)):
        (out,) = ct.call(add, *args)
        assert isinstance(out, torch.Tensor) and torch.equal(out, t + 1)
    # A call that fails after its tensors were taken lets go of them.
    taken = torch.arange(6.0, device=tdev)
    alive = weakref.ref(taken)
    with pytest.raises(ValueError, match=r"argument 1 is float32\(3,\), the program expects float32\(6,\)"):
        ct.call(add, taken, torch.zeros(3, device=tdev))
    with pytest.raises(TypeError, match="argument 1 is a list, neither a cuxla.Array nor a DLPack tensor"):
        ct.call(add, taken, [0.0] * 6)
    a.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        ct.call(add, taken, a)
    del taken
    gc.collect()
    assert alive() is None, "a failed call kept a view of its tensor"


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the resident size from /proc")
def test_calls_hold_no_host_memory_once_done(client, tdev):
    # 20,000 calls, each on a kept tensor and a new one: a leak of 1 KiB a
    # call would be 20 MiB. Warmed first, so that allocator pools and the
    # kept views are already there.
    add = cuxla.compile(_ELEMENTWISE.format(n=6, t="f32", op="add"), client=client)
    kept = torch.ones(6, device=tdev)

    def calls(n):
        for _ in range(n):
            (out,) = ct.call(add, kept, torch.zeros(6, device=tdev))
        if tdev == "cuda":
            torch.cuda.synchronize()
        gc.collect()
        return out

    calls(5000)
    before = _resident_bytes()
    assert torch.equal(calls(20000), kept)
    grown = _resident_bytes() - before
    assert grown < 8 << 20, f"resident memory grew by {grown / 2**20:.1f} MiB over 20,000 calls"


def _storage_holders(storage: torch.UntypedStorage) -> int:
    """How many references `storage` has (PyTorch's count), cuxla's view among them."""
    return torch._C._storage_Use_Count(storage._cdata)


def _settled(count: Callable[[], int], expected: int, tdev: str) -> int:
    """count(), once it reaches `expected` or 2 s have passed: a view let go
    of on CUDA gives its tensor back when its programs are done, and its
    deleter runs at the next bytecode or import."""
    deadline = time.monotonic() + 2.0
    while count() != expected and time.monotonic() < deadline:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        cuxla.from_dlpack(torch.zeros(1, device=tdev))  # runs the queued deleters
        time.sleep(0.001)
    return count()


def test_call_keeps_one_view_per_tensor_while_its_memory_stays(client, tdev):
    add = cuxla.compile(_ELEMENTWISE.format(n=6, t="f32", op="add"), client=client)
    t = torch.zeros(6, device=tdev)
    one = torch.ones(6, device=tdev)
    first = t.untyped_storage()
    alone = _storage_holders(first)  # t and `first`
    kept = _cuxla.call_view_count()
    assert torch.equal(ct.call(add, t, one)[0].cpu(), torch.ones(6))
    assert _cuxla.call_view_count() == kept, "a tensor seen once was kept"
    assert torch.equal(ct.call(add, t, one)[0].cpu(), torch.ones(6))  # seen again: kept
    # The first call's view is let go of when XLA is done with it: on CUDA after the output is ready.
    assert _cuxla.call_view_count() == kept + 2
    assert _settled(lambda: _storage_holders(first), alone + 1, tdev) == alone + 1
    t.add_(41.0)  # a write in place is seen through the kept view
    assert torch.equal(ct.call(add, t, one)[0].cpu(), torch.full((6,), 42.0))
    assert _cuxla.call_view_count() == kept + 2, "a second view was made"
    assert _settled(lambda: _storage_holders(first), alone + 1, tdev) == alone + 1, "a second view was made"
    t.set_(torch.full((6,), 7.0, device=tdev))  # other memory: the old view let go of, a new one made
    assert torch.equal(ct.call(add, t, one)[0].cpu(), torch.full((6,), 8.0))
    assert _settled(lambda: _storage_holders(first), alone - 1, tdev) == alone - 1
    assert torch.equal(ct.call(add, t, one)[0].cpu(), torch.full((6,), 8.0))
    assert _cuxla.call_view_count() == kept + 2
    second = t.untyped_storage()
    before = _storage_holders(second)  # t, `second` and the view
    del t
    gc.collect()
    assert _cuxla.call_view_count() == kept + 1, "the view of a dead tensor was kept"
    assert _settled(lambda: _storage_holders(second), before - 2, tdev) == before - 2
    weight = torch.nn.Parameter(torch.full((6,), 2.0, device=tdev))
    for _ in range(2):
        assert torch.equal(ct.call(add, weight, one)[0].cpu(), torch.full((6,), 3.0))
    assert _cuxla.call_view_count() == kept + 2
    _cuxla.forget_call_views()
    assert _cuxla.call_view_count() == 0


def test_an_output_given_back_to_a_call_is_read_in_place(client, tdev):
    # An output of one call given to the next (an activation saved for the
    # backward) is read through XLA's own buffer, no view of it made or kept:
    # PyTorch's writes to it are seen, and another reading of its memory (a
    # reshape) reads right.
    add = cuxla.compile(_ELEMENTWISE.format(n=6, t="f32", op="add"), client=client)
    add_matrices = cuxla.compile(_ELEMENTWISE.format(n="2x3", t="f32", op="add"), client=client)
    one = torch.ones(6, device=tdev)
    kept = _cuxla.call_view_count()
    (out,) = ct.call(add, torch.arange(6.0, device=tdev), one)
    (twice,) = ct.call(add, out, out)
    assert torch.equal(twice.cpu(), 2 * torch.arange(1.0, 7.0))
    out.mul_(10.0)
    for _ in range(3):
        (again,) = ct.call(add, out, one)
        assert torch.equal(again.cpu(), 10 * torch.arange(1.0, 7.0) + 1)
    (matrix,) = ct.call(add_matrices, out.view(2, 3), torch.ones(2, 3, device=tdev))
    assert torch.equal(matrix.cpu(), (10 * torch.arange(1.0, 7.0) + 1).view(2, 3))
    # `one`, PyTorch's, is kept (where views are kept at all: not on CUDA's
    # ready-stream route); `out`, seen five times, is not.
    keeps_views = tdev == "cpu" or bool(client._compute_stream(client.devices()[0])[0])
    assert _cuxla.call_view_count() == kept + keeps_views


def test_calls_on_fresh_tensors_keep_no_views_of_dead_ones(client, tdev):
    add = cuxla.compile(_ELEMENTWISE.format(n=6, t="f32", op="add"), client=client)
    kept = _cuxla.call_view_count()
    for i in range(1000):
        (out,) = ct.call(add, torch.full((6,), float(i), device=tdev), torch.ones(6, device=tdev))
    assert torch.equal(out.cpu(), torch.full((6,), 1000.0))
    assert _cuxla.call_view_count() == kept
    # A new tensor object where the one before it lived, on the same memory
    # (Python reuses the address), is not one seen before: no view is kept.
    one = torch.ones(6, device=tdev)
    base = torch.zeros(6, device=tdev)
    reused, last = 0, None
    for i in range(200):
        x = base.view(6).fill_(float(i))
        reused += id(x) == last
        last = id(x)
        assert torch.equal(ct.call(add, x, one)[0].cpu(), torch.full((6,), i + 1.0))
        assert _cuxla.call_view_count() == kept + (i > 0), f"call {i} kept a view of a tensor it saw once"
        del x
    assert reused > 0, "no address was reused: the case above was not exercised"


def test_asalignedarray_copies_only_what_the_cpu_plugin_cannot_view():
    aligned = cuxla.asalignedarray(np.arange(6, dtype=np.float64).reshape(2, 3))
    assert aligned.ctypes.data % 64 == 0 and aligned.flags.c_contiguous
    assert cuxla.asalignedarray(aligned) is aligned
    for values in (aligned[:, 1:], aligned.T, np.arange(5, dtype=np.int8)[1:], 2.5, [[1, 2]]):
        out = cuxla.asalignedarray(values)
        assert out.ctypes.data % 64 == 0 and out.flags.c_contiguous and np.array_equal(out, values)
    assert cuxla.asalignedarray([1, 2], np.float32).dtype == np.float32
    empty = np.zeros((0, 3))  # no memory to view, wherever it points
    assert cuxla.asalignedarray(empty) is empty


def test_numpy_is_a_producer_and_a_consumer(client):
    if client.platform != "cpu":
        pytest.skip("NumPy arrays live in host memory")
    n = cuxla.asalignedarray(np.arange(6, dtype=np.float64).reshape(2, 3))
    a = cuxla.from_dlpack(n)
    assert a.is_view and a.unsafe_buffer_pointer() == n.ctypes.data
    back = np.from_dlpack(a)
    assert back.ctypes.data == n.ctypes.data and np.array_equal(back, n)


def test_capsules_versioned_and_legacy(tdev):
    t = torch.arange(3.0, device=tdev)
    versioned = t.__dlpack__(max_version=(1, 0))
    legacy = t.__dlpack__()
    for capsule in (versioned, legacy):
        a = cuxla.from_dlpack(capsule)
        assert a.is_view and a.unsafe_buffer_pointer() == t.data_ptr()
        with pytest.raises(ValueError, match="already consumed"):
            cuxla.from_dlpack(capsule)


def test_export_capsule_versions(tdev):
    a = cuxla.from_dlpack(torch.arange(3.0, device=tdev))
    assert "dltensor_versioned" in repr(a.__dlpack__(max_version=(1, 0)))
    assert "dltensor" in repr(a.__dlpack__()) and "versioned" not in repr(a.__dlpack__())
    assert a.__dlpack_device__() == ((2, a.device.local_hardware_id) if tdev == "cuda" else (1, 0))


def test_not_a_capsule_is_refused():
    with pytest.raises(TypeError, match="neither a DLPack capsule nor has __dlpack__"):
        cuxla.from_dlpack([1, 2, 3])


def test_export_to_another_device_is_refused(tdev):
    a = cuxla.from_dlpack(torch.arange(3.0, device=tdev))
    with pytest.raises(BufferError, match="own device"):
        a.__dlpack__(dl_device=(13, 0))


def test_export_copy_true_is_a_new_buffer(tdev):
    t = torch.arange(3.0, device=tdev)
    a = cuxla.from_dlpack(t)
    copied = torch.from_dlpack(a.__dlpack__(max_version=(1, 0), copy=True))
    assert copied.data_ptr() != t.data_ptr() and torch.equal(copied, t)


def test_producer_is_released_exactly_when_xla_is_done(client):
    if client.platform != "cpu":
        pytest.skip("NumPy producers are host memory")
    # 4 bytes past NumPy's 16-byte alignment: never 64-byte aligned, so
    # asalignedarray makes an aligned copy, whose base is the producer watched.
    n = cuxla.asalignedarray(np.ones(1001, np.float32)[1:])
    alive = weakref.ref(n.base)
    a = cuxla.from_dlpack(n)
    del n
    gc.collect()
    assert alive() is not None, "the view keeps its producer alive"
    a.delete()
    gc.collect()
    assert alive() is None, "deleting the view released the producer"


def _rss() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_100k_import_export_delete_cycles_keep_memory_flat(tdev):
    t = torch.arange(256, dtype=torch.float32, device=tdev)

    def cycle(n):
        for _ in range(n):
            a = cuxla.from_dlpack(t)
            back = ct.to_torch(a)
            a.delete()
            del back

    cycle(2000)
    before = _rss()
    device_before = _torch_memory.torch_memory_allocated() if tdev == "cuda" else 0
    cycle(100_000)
    growth = _rss() - before
    assert growth < 16 * 2**20, f"host RSS grew {growth / 2**20:.1f} MiB over 100k cycles"
    if tdev == "cuda":
        assert _torch_memory.torch_memory_allocated() == device_before


def test_jax_consumes_and_produces(client):
    jax = pytest.importorskip("jax")
    if client.platform != "cpu":
        pytest.skip("the CUDA case is in test_cuda.py")
    a = cuxla.asarray(np.arange(6, dtype=np.float32).reshape(2, 3), client=client)
    j = jax.dlpack.from_dlpack(a)
    assert np.array_equal(np.asarray(j), a.numpy())
    back = cuxla.from_dlpack(jax.numpy.arange(4.0))
    assert back.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
