"""CUDA only (scripts/gpu-check): stream ordering without host syncs, device
mapping, and the other CUDA DLPack frameworks (JAX, CuPy)."""
from typing import Callable

import numpy as np
import pytest
import torch

import cuxla
import cuxla.torch as ct
from cuxla import _cuxla

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run by scripts/gpu-check)")

TRIALS = 1000
N = 1 << 16

# out = v + 0 * sum(x @ x): the product keeps XLA's stream busy before `out` is written.
SLOW_ADD = f"""
func.func public @main(%x: tensor<2048x2048xf32>, %v: tensor<{N}xf32>) -> tensor<{N}xf32> {{
  %xx = stablehlo.dot_general %x, %x, contracting_dims = [1] x [0] : (tensor<2048x2048xf32>, tensor<2048x2048xf32>) -> tensor<2048x2048xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%xx init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<2048x2048xf32>, tensor<f32>) -> tensor<f32>
  %z = stablehlo.multiply %s, %zero : tensor<f32>
  %zb = stablehlo.broadcast_in_dim %z, dims = [] : (tensor<f32>) -> tensor<{N}xf32>
  %out = stablehlo.add %v, %zb : tensor<{N}xf32>
  return %out : tensor<{N}xf32>
}}
"""

# The tensors of the stream-ordering tests: (ROWS, COLS) float32.
ROWS, COLS = 256, N // 256
COPY = f"""
func.func public @main(%v: tensor<{ROWS}x{COLS}xf32>) -> tensor<{ROWS}x{COLS}xf32> {{
  %one = stablehlo.constant dense<1.0> : tensor<{ROWS}x{COLS}xf32>
  %out = stablehlo.multiply %v, %one : tensor<{ROWS}x{COLS}xf32>
  return %out : tensor<{ROWS}x{COLS}xf32>
}}
"""
ADD = f"""
func.func public @main(%x: tensor<{ROWS}x{COLS}xf32>, %y: tensor<{ROWS}x{COLS}xf32>) -> tensor<{ROWS}x{COLS}xf32> {{
  %out = stablehlo.add %x, %y : tensor<{ROWS}x{COLS}xf32>
  return %out : tensor<{ROWS}x{COLS}xf32>
}}
"""
# Contiguous tensors are imported as views; steps are copied compact at
# import; a transposed view is copied row-major when a program takes it.
# The copies read PyTorch's memory on their own, and must wait for it too.
LAYOUTS = ["contiguous", "steps", "transposed"]


def _written_late(layout: str, value: float) -> torch.Tensor:
    """A (ROWS, COLS) tensor in `layout` that PyTorch's current stream fills
    with `value` only after a GPU sleep: whoever reads it without waiting
    for that stream reads something else."""
    shape = {"contiguous": (ROWS, COLS), "steps": (ROWS, 2 * COLS), "transposed": (COLS, ROWS)}[layout]
    t = torch.empty(shape, device="cuda")
    torch.cuda._sleep(200_000)
    t.fill_(value)
    return {"contiguous": t, "steps": t[:, ::2], "transposed": t.T}[layout]


def _wrong_in(trials: int, right: Callable[[int], bool]) -> int:
    """How many of `trials` calls of `right(trial)` on a side stream (PyTorch's
    current stream there) return False."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        return sum(not right(trial) for trial in range(trials))


def _trials(layout: str) -> int:
    return TRIALS if layout == "contiguous" else TRIALS // 4


@pytest.fixture
def cuda_client(client):
    if client.platform != "cuda":
        pytest.skip("CUDA client only")
    return client


_READY_STREAM_CLIENT = []  # made once: a CUDA client owns streams and memory


@pytest.fixture(params=["compute-stream", "ready-stream"])
def ordering_client(request, cuda_client, monkeypatch):
    """The process's CUDA client, whose imports make XLA's compute stream wait
    for the producer, and one whose compute stream is left unknown
    (CUXLA_COMPUTE_STREAM=0), so that views wait through PJRT's
    external-ready streams instead: the route of plugins without FFI."""
    if request.param == "compute-stream":
        stream, why_not = cuda_client._compute_stream(cuda_client.devices()[0])
        assert stream != 0, why_not
        return cuda_client
    if not _READY_STREAM_CLIENT:
        monkeypatch.setenv("CUXLA_COMPUTE_STREAM", "0")
        fallback = cuxla.Client("cuda")
        stream, why_not = fallback._compute_stream(fallback.devices()[0])  # probed now, with the variable set
        assert stream == 0 and "CUXLA_COMPUTE_STREAM=0" in why_not
        _READY_STREAM_CLIENT.append(fallback)
    return _READY_STREAM_CLIENT[0]


class ProtocolOnly:
    """A producer with `__dlpack__` but no DLPack C exchange API."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, **kwargs):
        return self.tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("path", ["exchange-api", "dlpack-protocol"])
def test_import_waits_for_torch_work_on_its_current_stream(ordering_client, path, layout):
    copy = cuxla.compile(COPY, client=ordering_client)

    def right(trial):
        t = _written_late(layout, float(trial))
        imported = cuxla.from_dlpack(t if path == "exchange-api" else ProtocolOnly(t), client=ordering_client)
        assert imported.is_view == (layout != "steps")
        (out,) = copy(imported)
        return bool(np.all(out.numpy() == trial))

    wrong = _wrong_in(_trials(layout), right)
    assert wrong == 0, f"{wrong} of {_trials(layout)} imports read before PyTorch's write"


@pytest.mark.parametrize("reader", ["numpy", "torch on another stream", "jax", "block_until_ready"])
def test_a_fresh_import_is_read_after_torch_by_more_than_programs(ordering_client, reader):
    # Programs run on the stream the import made wait; host copies and other
    # streams go by the view's readiness, which must cover the write too.
    other = torch.cuda.Stream()
    jax = pytest.importorskip("jax") if reader == "jax" else None

    def right(trial):
        imported = cuxla.from_dlpack(_written_late("contiguous", float(trial)), client=ordering_client)
        if reader == "numpy":
            return bool(np.all(imported.numpy() == trial))
        if reader == "jax":
            return bool(np.all(np.asarray(jax.dlpack.from_dlpack(imported)) == trial))
        with torch.cuda.stream(other):
            if reader == "block_until_ready":  # then read with no stream ordering at all
                unordered = torch.from_dlpack(imported.block_until_ready().__dlpack__(stream=-1))
                return bool((unordered.clone() == trial).all().item())
            return bool((ct.to_torch(imported).clone() == trial).all().item())

    wrong = _wrong_in(TRIALS // 4, right)
    assert wrong == 0, f"{wrong} of {TRIALS // 4} reads ({reader}) came before PyTorch's write"


def test_export_makes_torch_wait_for_xla_writes(cuda_client):
    slow = cuxla.compile(SLOW_ADD, client=cuda_client)
    x = cuxla.from_dlpack(torch.randn(2048, 2048, device="cuda"))

    def right(trial):
        (out,) = slow(x, torch.full((N,), float(trial), device="cuda"))
        t = ct.to_torch(out)  # torch's current stream (side) waits for XLA
        return bool((t == trial).all().item())

    wrong = _wrong_in(TRIALS, right)
    assert wrong == 0, f"{wrong} of {TRIALS} exports were read before XLA's write"


def test_call_round_trip_on_the_current_stream(cuda_client):
    slow = cuxla.compile(SLOW_ADD, client=cuda_client)
    x = torch.randn(2048, 2048, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for trial in range(100):
            v = torch.full((N,), float(trial), device="cuda")
            (out,) = ct.call(slow, x, v)
            assert bool((out == trial).all().item())


@pytest.mark.parametrize("made_by", ["torch", "xla"])
def test_a_tensor_given_again_waits_for_torch_at_every_call(ordering_client, made_by):
    # cuxla.torch.call reads a tensor it is given again without a new
    # import: PyTorch's through the view it keeps (on the compute-stream
    # route; the ready-stream route makes a view per call), an output of
    # XLA's through XLA's own buffer. Each call must still wait for
    # PyTorch's writes to it since the last.
    add = cuxla.compile(ADD, client=ordering_client)
    kept = _cuxla.call_view_count()
    y = torch.zeros(ROWS, COLS, device="cuda")
    x = torch.zeros(ROWS, COLS, device="cuda") if made_by == "torch" else ct.call(add, y, y)[0]

    def right(trial):
        torch.cuda._sleep(200_000)
        x.fill_(float(trial))
        (out,) = ct.call(add, x, y)
        return bool((out == trial).all().item())

    wrong = _wrong_in(TRIALS, right)
    assert wrong == 0, f"{wrong} of {TRIALS} calls read {made_by}'s tensor before PyTorch's write"
    compute_stream, _ = ordering_client._compute_stream(ordering_client.devices()[0])
    views = 2 if made_by == "torch" else 1  # XLA's output is read through its own buffer: no view
    assert _cuxla.call_view_count() == kept + (views if compute_stream else 0)


def test_cuda_tensor_lands_on_its_local_hardware_id(cuda_client):
    for index in range(torch.cuda.device_count()):
        t = torch.ones(4, device=f"cuda:{index}")
        a = cuxla.from_dlpack(t)
        assert a.device.local_hardware_id == index
        assert a.__dlpack_device__() == (2, index)


def test_an_explicit_device_of_the_other_platform_copies_or_refuses(cuda_client):
    if not _cuxla.find_plugin("cpu", cuxla._client.package_dirs())[0]:
        pytest.skip("needs the CPU plugin beside the CUDA one")
    host = cuxla._client.client_for_platform("cpu").devices()[0]
    gpu = cuda_client.devices()[0]
    t = torch.zeros(N, device="cuda")
    torch.cuda._sleep(20_000_000)  # the write below is still pending at the import
    t.fill_(7.0)
    copied = cuxla.from_dlpack(t, device=host)
    assert copied.device.platform == "cpu" and not copied.is_view
    assert (copied.numpy() == 7.0).all()
    with pytest.raises(BufferError, match="on cuda:0, not on the requested cpu device 0, and copy=False"):
        cuxla.from_dlpack(t, device=host, copy=False)
    h = torch.arange(6.0)
    uploaded = cuxla.from_dlpack(h, device=gpu)
    assert uploaded.device.platform == "cuda" and not uploaded.is_view
    h[0] = 9.0
    assert ct.to_torch(uploaded).cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    with pytest.raises(BufferError, match="on cpu:0, not on the requested cuda device 0, and copy=False"):
        cuxla.from_dlpack(h, device=gpu, copy=False)


def test_jax_and_cupy_consume_a_cuxla_array(cuda_client):
    t = torch.arange(8, dtype=torch.float32, device="cuda")
    a = cuxla.from_dlpack(t)
    jax = pytest.importorskip("jax")
    cupy = pytest.importorskip("cupy")
    j = jax.dlpack.from_dlpack(a)
    assert np.array_equal(np.asarray(j), np.arange(8, dtype=np.float32))
    c = cupy.from_dlpack(a)
    assert c.data.ptr == t.data_ptr()
    assert np.array_equal(cupy.asnumpy(c), np.arange(8, dtype=np.float32))


def test_cupy_and_jax_arrays_import_zero_copy(cuda_client):
    cupy = pytest.importorskip("cupy")
    c = cupy.arange(10, dtype=cupy.float32)
    a = cuxla.from_dlpack(c)
    assert a.is_view and a.unsafe_buffer_pointer() == c.data.ptr
    jax = pytest.importorskip("jax")
    j = jax.numpy.arange(10.0, dtype=jax.numpy.float32, device=jax.devices("gpu")[0])
    b = cuxla.from_dlpack(j)
    assert np.array_equal(b.numpy(), np.arange(10, dtype=np.float32))
    assert b.unsafe_buffer_pointer() == j.unsafe_buffer_pointer()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_argument_of_a_call_is_ordered_after_torch(ordering_client, layout):
    # Only the first argument's import carries the stream ordering: the
    # second, written after it, must still be read after its write — also
    # when it is copied first.
    add = cuxla.compile(ADD, client=ordering_client)

    def right(trial):
        x = torch.full((ROWS, COLS), float(trial), device="cuda")
        (out,) = ct.call(add, x, _written_late(layout, float(trial)))
        return bool((out == 2 * trial).all().item())

    wrong = _wrong_in(_trials(layout), right)
    assert wrong == 0, f"{wrong} of {_trials(layout)} calls read an argument before PyTorch's write"
