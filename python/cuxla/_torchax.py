"""torchax, loaded once with the adjustments cuxla needs.

- torchax 0.0.13 names Dimname overloads (aten.prod.dim_Dimname...) that
  PyTorch >= 2.13 no longer has; their absence only matters to named-tensor
  programs, so lookups of missing overloads give inert placeholders while
  torchax builds its tables.
- On import torchax renames PyTorch's PrivateUse1 backend to "jax" and
  registers a device module for it. PyTorch then takes it for an
  accelerator: Dynamo asks it for a current stream, autograd for a device
  guard, and both fail ("PyTorch is not linked with support for jax
  devices"). cuxla only uses torchax to trace graphs into JAX, never as a
  device, so both registrations are skipped while torchax is imported.
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


@contextlib.contextmanager
def _no_device_registration():
    rename, register = torch.utils.rename_privateuse1_backend, torch._register_device_module
    torch.utils.rename_privateuse1_backend = lambda name: None
    torch._register_device_module = lambda name, module: None
    try:
        yield
    finally:
        torch.utils.rename_privateuse1_backend, torch._register_device_module = rename, register


@functools.cache
def environment():
    """torchax's environment, built once."""
    with _missing_overloads_as_placeholders() as missing, _no_device_registration():
        import torchax

        env = torchax.default_env()
    if missing:
        log.debug("torchax names overloads this PyTorch lacks: %s", ", ".join(missing))
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
