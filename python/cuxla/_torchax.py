"""torchax, loaded once with the adjustments cuxla needs.

- torchax 0.0.13 names Dimname overloads (aten.prod.dim_Dimname...) that
  PyTorch >= 2.13 no longer has; their absence only matters to named-tensor
  programs, so lookups of missing overloads give inert placeholders while
  torchax builds its tables.
- torchax registers a "jax" accelerator that says it is available; Dynamo
  then asks it for a current stream, which it cannot give. cuxla only uses
  torchax to trace graphs into JAX, never as a device, so it reports itself
  unavailable.
- Lowering runs with 64-bit types enabled (PyTorch's int64 and float64 stay
  64-bit) and matrix products at full precision, as in eager PyTorch.
"""
from __future__ import annotations

import contextlib
import functools
import logging

import torch

log = logging.getLogger("cuxla.dynamo")


@contextlib.contextmanager
def _missing_overloads_as_placeholders():
    packet = torch._ops.OpOverloadPacket
    original = packet.__getattr__
    missing: list[str] = []

    def lookup(self, name):
        try:
            return original(self, name)
        except AttributeError:
            if name.startswith("__"):
                raise
            missing.append(f"{self._qualified_op_name}.{name}")
            return object()  # a key no graph node dispatches to

    packet.__getattr__ = lookup
    try:
        yield missing
    finally:
        packet.__getattr__ = original


@functools.cache
def environment():
    """torchax's environment, built once."""
    with _missing_overloads_as_placeholders() as missing:
        import torchax

        env = torchax.default_env()
    if missing:
        log.debug("torchax names overloads this PyTorch lacks: %s", ", ".join(missing))
    torchax.device_module.is_available = lambda: False
    torchax.device_module.device_count = lambda: 0
    return env


@contextlib.contextmanager
def lowering_context():
    """64-bit types and full-precision matrix products while tracing."""
    import jax

    x64 = jax.enable_x64(True) if hasattr(jax, "enable_x64") else jax.experimental.enable_x64()
    with x64, jax.default_matmul_precision("highest"):
        yield


def has_lowering(target) -> bool:
    """Whether torchax can lower the ATen op `target` (directly or by decomposition)."""
    try:
        environment()._get_op_or_decomp(target)
        return True
    except Exception:  # torchax's OperatorNotFound, or a target it cannot look up
        return False


def jax_dtype(dtype: torch.dtype):
    from torchax.ops import mappings

    return mappings.t2j_dtype(dtype)
