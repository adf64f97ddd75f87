"""`python -m cuxla demo`: host data to device arrays, one compiled XLA program
run on them, the results checked against NumPy, and the timings."""
from __future__ import annotations

import statistics
import time

import numpy as np

import cuxla

from ._cuxla import default_platform
from ._info import missing

# y = tanh(x @ w + b), and the sum of y: a small dense layer with a reduction.
# HIGHEST precision: full float32 products on GPUs too (XLA's default there is TF32).
PROGRAM = """
func.func public @main(%x: tensor<256x512xf32>, %w: tensor<512x128xf32>, %b: tensor<128xf32>)
    -> (tensor<256x128xf32>, tensor<f32>) {
  %xw = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<256x512xf32>, tensor<512x128xf32>) -> tensor<256x128xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<128xf32>) -> tensor<256x128xf32>
  %z = stablehlo.add %xw, %bb : tensor<256x128xf32>
  %y = stablehlo.tanh %z : tensor<256x128xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%y init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<256x128xf32>, tensor<f32>) -> tensor<f32>
  return %y, %s : tensor<256x128xf32>, tensor<f32>
}
"""


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:9.1f} µs"


def inputs(device: cuxla.Device) -> list[np.ndarray]:
    """x, w and b, on the CPU in memory its plugin can view (asalignedarray)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 512), dtype=np.float32)
    w = (rng.standard_normal((512, 128)) / np.sqrt(512)).astype(np.float32)
    b = rng.standard_normal(128, dtype=np.float32)
    if device.platform == "cpu":
        return [cuxla.asalignedarray(v) for v in (x, w, b)]
    return [x, w, b]


def upload(values: list[np.ndarray], device: cuxla.Device) -> list[cuxla.Array]:
    """`values` on `device`: views of the host memory on the CPU, which
    computes on it where it lies; copies on a GPU."""
    if device.platform == "cpu":
        return [cuxla.from_dlpack(v, device=device, copy=False) for v in values]
    return [cuxla.asarray(v, device=device) for v in values]


def run(platform: str | None = None, repeats: int = 200) -> int:
    lacking = missing(platform or default_platform())
    if lacking:
        raise cuxla.NoDeviceError(lacking)
    client = cuxla.Client(platform) if platform else cuxla.default_client()
    device = client.devices()[0]
    print(f"client: {client.platform} ({client.platform_version}), PJRT C API "
          f"{'.'.join(map(str, client.api_version))}, device {device.id}: {device.kind}")

    x, w, b = inputs(device)
    start = time.perf_counter()
    args = upload([x, w, b], device)
    for a in args:
        a.block_until_ready()
    upload_time = time.perf_counter() - start
    handed = "views" if all(a.is_view for a in args) else "copies"
    print(f"arrays: {', '.join(f'{a.dtype}{a.shape}' for a in args)} ({handed} of the NumPy arrays)")

    start = time.perf_counter()
    executable = cuxla.compile(PROGRAM, client=client)
    compile_time = time.perf_counter() - start
    start = time.perf_counter()
    assert cuxla.compile(PROGRAM, client=client) is executable
    cached_time = time.perf_counter() - start

    y, s = executable(*args)
    expected_y = np.tanh(x @ w + b)
    got_y, got_s = y.numpy(), s.numpy()
    error = float(np.max(np.abs(got_y - expected_y)))
    ok = error < 1e-4 and abs(float(got_s) - float(expected_y.sum())) < 1e-2 * max(1.0, abs(float(expected_y.sum())))
    print(f"result: y{got_y.shape} max |y - numpy| = {error:.2e}, sum(y) = {float(got_s):.4f} "
          f"(numpy {float(expected_y.sum()):.4f}) -> {'OK' if ok else 'MISMATCH'}")

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        y, s = executable(*args)
        s.block_until_ready()
        times.append(time.perf_counter() - start)
    print("timings:")
    print(f"  {f'host -> device (3 {handed})':28}{_us(upload_time)}")
    print(f"  compile                     {_us(compile_time)}")
    print(f"  compile again (cache hit)   {_us(cached_time)}")
    print(f"  execute + wait, p50 of {repeats}  {_us(statistics.median(times))}")
    start = time.perf_counter()
    y.numpy()
    print(f"  device -> host (y)          {_us(time.perf_counter() - start)}")
    return 0 if ok else 1
