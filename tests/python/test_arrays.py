"""Host <-> device copies for every dtype, array properties and deletion."""
import ml_dtypes  # noqa: F401  (registers bfloat16 and the float8 names with NumPy)
import numpy as np
import pytest

import cuxla
from cuxla import _cuxla


def _pattern(dtype: np.dtype, shape) -> np.ndarray:
    """Deterministic bytes covering every bit pattern the dtype can hold."""
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.random.default_rng(7).integers(0, 256, size=count * dtype.itemsize, dtype=np.uint8)
    if dtype == np.bool_:
        raw &= 1
    return raw.view(dtype).reshape(shape)


@pytest.mark.parametrize("name", _cuxla.DTYPES)
def test_host_round_trip_is_bit_exact(device, name):
    host = _pattern(np.dtype(name), (3, 5))
    array = cuxla.asarray(host, device=device)
    back = array.numpy()
    assert array.dtype == host.dtype and back.dtype == host.dtype
    assert back.tobytes() == host.tobytes()


def test_float64_is_not_narrowed(device):
    host = np.array([1.0 + 2.0**-40, np.pi], dtype=np.float64)
    assert cuxla.asarray(host, device=device).numpy().tobytes() == host.tobytes()


def test_array_properties(device):
    array = cuxla.asarray(np.zeros((2, 3, 4), np.int16), device=device)
    assert array.shape == (2, 3, 4)
    assert array.ndim == 3 and array.size == 24 and array.nbytes == 48
    assert array.dtype == np.int16
    assert array.layout == (2, 1, 0)
    assert array.device == device
    assert array.unsafe_buffer_pointer() != 0


def test_rank_zero_round_trip(device):
    array = cuxla.asarray(np.float32(2.5), device=device)
    assert array.shape == () and array.ndim == 0 and array.size == 1
    assert array.numpy() == np.float32(2.5)


def test_size_zero_round_trip(device):
    array = cuxla.asarray(np.zeros((0, 7), np.float32), device=device)
    assert array.shape == (0, 7) and array.nbytes == 0
    assert array.numpy().shape == (0, 7)


def test_non_contiguous_host_data_is_copied_in_order(device):
    host = np.arange(24, dtype=np.int32).reshape(4, 6)[:, ::2].T
    assert np.array_equal(cuxla.asarray(host, device=device).numpy(), host)


def test_python_scalars_and_lists(device):
    assert cuxla.asarray([[1, 2], [3, 4]], device=device).numpy().tolist() == [[1, 2], [3, 4]]
    assert cuxla.asarray(True, device=device).dtype == np.bool_


def test_unsupported_dtype_is_a_buffer_error(device):
    with pytest.raises(BufferError, match="does not support dtype"):
        cuxla.asarray(np.array(["text"]), device=device)


def test_deleted_array_raises_on_every_use(device):
    array = cuxla.asarray(np.ones(4, np.float32), device=device)
    array.delete()
    assert array.is_deleted
    array.delete()  # idempotent
    for use in (array.numpy, array.block_until_ready, array.unsafe_buffer_pointer):
        with pytest.raises(RuntimeError, match="deleted"):
            use()


def test_block_until_ready_returns_the_array(device):
    array = cuxla.asarray(np.ones(4, np.float32), device=device)
    assert array.block_until_ready() is array


@pytest.mark.parametrize("obj", [[1.0, 2.0, 3.0], 7, np.arange(12.0).reshape(3, 4).T])
def test_host_memory_asarray_makes_is_64_byte_aligned(monkeypatch, obj):
    seen = []
    real = _cuxla._from_host

    def from_host(data, dtype, dims, device):
        seen.append(data)
        return real(data, dtype, dims, device)

    monkeypatch.setattr(_cuxla, "_from_host", from_host)
    a = cuxla.asarray(obj)
    assert seen and seen[0] % 64 == 0
    np.testing.assert_array_equal(a.numpy(), np.asarray(obj))
