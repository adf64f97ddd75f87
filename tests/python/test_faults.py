"""Faults: each gives a clear error (or a clean exit), the process lives on."""
import ctypes
import re
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import torch

import cuxla
import cuxla.torch as ct

import programs


class RaisingProducer:
    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        raise RuntimeError("the producer failed")


def test_a_producer_whose_dlpack_raises_passes_its_error_on():
    with pytest.raises(RuntimeError, match="the producer failed"):
        cuxla.from_dlpack(RaisingProducer())


class NotACapsuleProducer(RaisingProducer):
    def __dlpack__(self, **kwargs):
        return 42


def test_a_producer_returning_no_capsule_is_refused():
    with pytest.raises(TypeError, match="__dlpack__ returned a int, not a DLPack capsule"):
        cuxla.from_dlpack(NotACapsuleProducer())


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _ManagedVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _capsule(data: int, shape: tuple, keep: list, device_type: int = 1, deleter=None):
    """A versioned float32 DLPack capsule of the memory at `data`, made by
    hand (`deleter`: a _DELETER or None); `keep` holds what it points to."""
    dims = (ctypes.c_int64 * len(shape))(*shape)
    managed = _ManagedVersioned(1, 0, None, ctypes.cast(deleter, ctypes.c_void_p) if deleter else None, 0,
                                _DLTensor(data, device_type, 0, len(shape), 2, 32, 1, dims, None, 0))
    keep += [dims, managed, deleter]
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(managed), b"dltensor_versioned", None)


# What null-deleter capsules point to: with no deleter, nothing says when
# cuxla is done with it (XLA may let a deleted view go later, on its own
# thread), so it is kept for the process, as such a producer must.
_NEVER_RELEASED: list = []


def _capsule_with_null_deleter(host: np.ndarray, device_type: int = 1):
    _NEVER_RELEASED.append(host)
    return _capsule(host.ctypes.data, host.shape, _NEVER_RELEASED, device_type)


def test_a_capsule_with_a_null_deleter_is_imported_and_released_safely(client):
    if client.platform != "cpu":
        pytest.skip("the capsule describes host memory")
    raw = np.zeros(4096 // 4 + 16, np.float32)
    start = (-raw.ctypes.data % 64) // 4
    host = raw[start:start + 16]
    host[:] = np.arange(16)
    array = cuxla.from_dlpack(_capsule_with_null_deleter(host))
    assert array.is_view and np.array_equal(array.numpy(), np.arange(16, dtype=np.float32))
    array.delete()  # PJRT's callback finds no deleter to call: nothing happens


def test_a_refused_capsule_is_left_unconsumed():
    capsule = _capsule_with_null_deleter(np.zeros(4, np.float32), device_type=8)  # Metal
    with pytest.raises(BufferError, match="CPU \\(1\\) or CUDA \\(2\\) devices, not DLPack device type 8"):
        cuxla.from_dlpack(capsule)
    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    assert name(capsule) == b"dltensor_versioned", "its owner keeps the tensor"


def test_out_of_memory_is_a_memory_error_and_the_client_still_works(client):
    if client.platform != "cpu":
        pytest.skip("on the CPU plugin, 4 TiB cannot be allocated; on a GPU it is the card's limit")
    program = cuxla.compile("""
    func.func public @main(%x: tensor<f32>) -> tensor<1099511627776xf32> {
      %0 = stablehlo.broadcast_in_dim %x, dims = [] : (tensor<f32>) -> tensor<1099511627776xf32>
      return %0 : tensor<1099511627776xf32>
    }""", client=client)
    with pytest.raises(MemoryError, match="Out of memory"):
        (out,) = program(cuxla.asarray(np.float32(1), client=client))
        out.block_until_ready()
    assert cuxla.asarray(np.arange(3.0), client=client).numpy().tolist() == [0.0, 1.0, 2.0]


def test_out_of_memory_on_torch_tensors_is_a_memory_error_naming_both_runtimes(client):
    # Twice what the device has: 4 TiB of host memory, twice the card's.
    device = "cuda" if client.platform == "cuda" else "cpu"
    elements = torch.cuda.mem_get_info()[1] // 2 if device == "cuda" else 1 << 40
    program = cuxla.compile(f"""
    func.func public @main(%x: tensor<f32>) -> tensor<{elements}xf32> {{
      %0 = stablehlo.broadcast_in_dim %x, dims = [] : (tensor<f32>) -> tensor<{elements}xf32>
      return %0 : tensor<{elements}xf32>
    }}""", client=client)
    with pytest.raises(MemoryError, match="(?i)out of memory") as raised:
        ct.call(program, torch.ones((), device=device))
    if device == "cuda":  # where PyTorch's memory and XLA's are one device's
        assert re.search(r"in use on cuda:0: PyTorch [\d.]+ GiB.*, XLA [\d.]+ GiB.*; [\d.]+ GiB of [\d.]+ GiB free",
                         str(raised.value)), raised.value
    square = cuxla.compile(programs.SCALAR_F32, client=client)  # and the client goes on
    assert ct.call(square, torch.full((), 3.0, device=device))[0].item() == 9.0


def test_a_huge_import_is_refused_cleanly(client):
    # A tensor claiming more memory than exists: copy=True must allocate it.
    if client.platform != "cpu":
        pytest.skip("host memory")
    base = torch.zeros(1)
    huge = torch.as_strided(base, (1 << 40,), (0,))  # a broadcast of 2^40 elements
    with pytest.raises(MemoryError):
        cuxla.from_dlpack(huge).block_until_ready()
    assert cuxla.from_dlpack(torch.ones(3)).numpy().tolist() == [1.0, 1.0, 1.0]


SHUTDOWN = textwrap.dedent("""
    import numpy as np, torch, cuxla, cuxla.torch as ct
    cpu = cuxla.default_client().platform == "cpu"
    kept_array = cuxla.asarray(np.arange(1000, dtype=np.float32))
    kept_torch = ct.to_torch(kept_array)
    # An export through the `__dlpack__` protocol (NumPy reads host memory only).
    kept_other = (np.from_dlpack if cpu else torch.from_dlpack)(cuxla.asarray(np.ones(8, np.float32)))
    kept_view = cuxla.from_dlpack(torch.arange(16.0, device="cpu" if cpu else "cuda"))
    capsule = kept_array.__dlpack__(max_version=(1, 0))   # never consumed
    # A view deleted while a program still reads it: XLA releases it from its
    # own thread when the program ends, perhaps while the interpreter exits.
    n = 384 if cpu else 2048
    loop = cuxla.compile(LOOP.format(n=n, steps=40 if cpu else 2000, inv_n=1.0 / n))
    busy = cuxla.from_dlpack(torch.full((n, n), 0.5, device="cpu" if cpu else "cuda"))
    (running,) = loop(busy)
    del busy
    print("ready", float(kept_torch.sum()))
""")


def test_interpreter_shutdown_with_exports_alive_exits_cleanly():
    script = f"LOOP = {programs.MATMUL_TANH_LOOP!r}\n" + SHUTDOWN
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ready 499500.0" in result.stdout
    assert "Fatal" not in result.stderr and "Segmentation" not in result.stderr


def _released_late(client, released_on: list, keep: list):
    """Imports a hand-made capsule whose deleter records its thread into
    `released_on`, runs a long program on it and deletes the Array while
    the program still reads it: XLA lets go of the view when the program
    ends, on one of its own threads. Returns the program's output."""
    cuda = client.platform == "cuda"
    n, steps = (1024, 400) if cuda else (384, 40)
    loop = cuxla.compile(programs.MATMUL_TANH_LOOP.format(n=n, steps=steps, inv_n=1.0 / n), client=client)

    @_DELETER
    def deleter(_):
        released_on.append(threading.current_thread())

    source = torch.full((n, n), 0.5, device="cuda" if cuda else "cpu")
    keep.append(source)
    array = cuxla.from_dlpack(_capsule(source.data_ptr(), (n, n), keep, 2 if cuda else 1, deleter))
    (out,) = loop(array)
    array.delete()
    assert released_on == [], "the program ended before the delete: the case is not exercised"
    out.block_until_ready()
    return out


def test_producer_deleters_run_on_python_threads_when_xla_lets_go_on_its_own(client):
    # PyTorch's deleter takes the GIL: run on XLA's thread, it would stall
    # (or deadlock) against Python. cuxla runs it on a Python thread instead:
    # here the main thread, at its next bytecode.
    released_on: list = []
    keep: list = []
    _released_late(client, released_on, keep)
    deadline = time.monotonic() + 10
    while not released_on and time.monotonic() < deadline:
        time.sleep(0.001)
    assert released_on == [threading.main_thread()]


def test_a_worker_thread_runs_the_queued_deleters_while_the_main_thread_is_blocked(client):
    # The main thread waits on a lock (no bytecode, so no pending call runs):
    # the worker's next import runs the queued deleter.
    released_on: list = []
    keep: list = []
    seen: list = []

    def worker():
        out = _released_late(client, released_on, keep)
        deadline = time.monotonic() + 10
        while not released_on and time.monotonic() < deadline:
            seen.append(cuxla.from_dlpack(torch.ones(4, device=out.device.platform)))
            time.sleep(0.001)
        del out

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert released_on == [thread], f"released on {released_on} after {len(seen)} imports"
