"""Compiling StableHLO and running it on Arrays; bad programs and arguments."""
import os

import numpy as np
import pytest

import cuxla

import programs


def _run(client, program, *host):
    executable = cuxla.compile(program, client=client)
    return [out.numpy() for out in executable(*(cuxla.asarray(h, client=client) for h in host))]


def test_elementwise_add(client):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 0.5, np.float32)
    (out,) = _run(client, programs.ADD_2x3, x, y)
    assert np.array_equal(out, x + y)


def test_dot(client):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    (out,) = _run(client, programs.DOT_2x3_3x4, a, b)
    assert np.allclose(out, a @ b, rtol=1e-6)


def test_reduction_keeps_float64(client):
    x = np.random.default_rng(1).standard_normal((4, 5))
    (out,) = _run(client, programs.ROW_SUM_4x5_F64, x)
    assert out.dtype == np.float64
    assert np.allclose(out, x.sum(axis=1), rtol=1e-12, atol=0)


def test_two_outputs(client):
    x = np.array([1, 2, 3], np.int32)
    y = np.array([4, 5, -6], np.int32)
    total, product = _run(client, programs.SUM_AND_PRODUCT_I32, x, y)
    assert total.tolist() == [5, 7, -3] and product.tolist() == [4, 10, -18]


def test_rank_zero_program(client):
    (out,) = _run(client, programs.SCALAR_F32, np.float32(3.0))
    assert out.shape == () and out == 9.0


def test_executable_reports_outputs_and_device(client):
    executable = cuxla.compile(programs.SUM_AND_PRODUCT_I32, client=client)
    assert executable.num_outputs == 2
    assert executable.device == client.devices()[0]


def test_memory_sizes_are_xlas_plan_for_one_execution(client):
    sizes = cuxla.compile(programs.SQUARED_SUM_256, client=client).memory_sizes()
    matrix = 256 * 256 * 4
    assert sizes["arguments"] == sizes["outputs"] == matrix, sizes
    assert sizes["scratch"] >= matrix, sizes  # a a + a, read by the second product
    assert sizes["aliased"] == 0, sizes


def test_same_program_is_compiled_once(client):
    first = cuxla.compile(programs.ADD_2x3, client=client)
    assert cuxla.compile(programs.ADD_2x3, client=client) is first
    assert cuxla.compile(programs.ADD_2x3.encode(), client=client) is first


def test_stablehlo_bytecode(client):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax import export

    spec = jax.ShapeDtypeStruct((2, 3), jnp.float32)
    exported = export.export(jax.jit(lambda x, y: jnp.sin(x) * y + 1.0))(spec, spec)
    bytecode = exported.mlir_module_serialized
    assert bytecode.startswith(b"ML\xefR")  # MLIR bytecode magic
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (out,) = _run(client, bytecode, x, x)
    assert np.allclose(out, np.sin(x) * x + 1.0, rtol=1e-6)


def test_invalid_mlir_reports_the_compiler_message(client):
    with pytest.raises((ValueError, RuntimeError), match="PJRT_Client_Compile: .*garbage"):
        cuxla.compile("garbage", client=client)


def test_empty_program_is_a_value_error(client):
    with pytest.raises(ValueError, match="empty program"):
        cuxla.compile(b"", client=client)


def test_program_of_wrong_type_is_a_type_error(client):
    with pytest.raises(TypeError, match="str or bytes"):
        cuxla.compile(42, client=client)


def test_wrong_argument_count(client):
    executable = cuxla.compile(programs.ADD_2x3, client=client)
    x = cuxla.asarray(np.zeros((2, 3), np.float32), client=client)
    with pytest.raises(ValueError, match="takes 2 arguments, 1 given"):
        executable(x)


@pytest.mark.parametrize("shape, dtype, message", [
    ((3, 2), np.float32, r"argument 1 is float32\(3, 2\), the program expects float32\(2, 3\)"),
    ((2, 3), np.int32, r"argument 1 is int32\(2, 3\)"),
])
def test_wrong_argument_shape_or_dtype(client, shape, dtype, message):
    executable = cuxla.compile(programs.ADD_2x3, client=client)
    x = cuxla.asarray(np.zeros((2, 3), np.float32), client=client)
    y = cuxla.asarray(np.zeros(shape, dtype), client=client)
    with pytest.raises(ValueError, match=message):
        executable(x, y)


def test_argument_that_is_no_tensor(client):
    executable = cuxla.compile(programs.ADD_2x3, client=client)
    x = cuxla.asarray(np.zeros((2, 3), np.float32), client=client)
    with pytest.raises(TypeError, match="argument 1 is a list, neither a cuxla.Array nor a DLPack tensor"):
        executable(x, [[0.0] * 3] * 2)


def test_deleted_argument(client):
    executable = cuxla.compile(programs.ADD_2x3, client=client)
    x = cuxla.asarray(np.zeros((2, 3), np.float32), client=client)
    y = cuxla.asarray(np.zeros((2, 3), np.float32), client=client)
    y.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        executable(x, y)


def _rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_failures_leak_no_memory(client):
    executable = cuxla.compile(programs.ADD_2x3, client=client)
    x = cuxla.asarray(np.zeros((2, 3), np.float32), client=client)
    bad = cuxla.asarray(np.zeros((3, 2), np.float32), client=client)

    def fail_many(n):
        for _ in range(n):
            with pytest.raises(ValueError):
                executable(x, bad)
            with pytest.raises((ValueError, RuntimeError)):
                cuxla.compile("func.func @main(", client=client)
            (ok,) = executable(x, x)
            ok.delete()

    fail_many(200)  # warm up allocator caches
    before = _rss_bytes()
    fail_many(2000)
    growth = _rss_bytes() - before
    assert growth < 8 * 2**20, f"RSS grew by {growth / 2**20:.1f} MiB over 2000 failing calls"
