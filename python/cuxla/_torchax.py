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
- torchax's environment draws a JAX random key when it is made (and again
  on each new thread), which makes JAX create its clients, CUDA's with its
  default preallocation of 75% of the GPU. cuxla's environment holds no key:
  a program that draws random numbers gets its key as an input (see dynamo).
- Lowering touches no device: it runs under a one-device abstract mesh, with
  a stand-in default device that names the platform, so that `jax.jit`'s
  lowering never asks JAX for its devices (which would create its clients).
- Lowering runs with 64-bit types enabled (PyTorch's int64 and float64 stay
  64-bit), and float32 matrix products (and convolutions) at the precision
  PyTorch's float32 matmuls have on the platform: on CUDA, full float32
  unless the user allowed TF32 (`torch.set_float32_matmul_precision`, or
  `torch.backends.cuda.matmul.fp32_precision = "tf32"`); on CPU full float32.
- cuxla's own lowerings (`_lowerings`) are added to torchax's ops.
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


@contextlib.contextmanager
def _no_random_key():
    import jax

    make_key = jax.random.key
    jax.random.key = lambda seed: None
    try:
        yield
    finally:
        jax.random.key = make_key


@functools.cache
def environment():
    """torchax's environment, built once, holding no random key; also
    torchax's default environment, so that torchax never makes another."""
    with _missing_overloads_as_placeholders() as missing, _no_device_registration():
        import torchax
        from torchax.tensor import Environment, RuntimeProperty, Tensor, _PropertyHolder

        with _no_random_key():
            env = Environment()
    # torchax names its device "jax", a name PyTorch only knows once the
    # renaming skipped above is done; under its own name the device is known.
    Tensor.device = property(lambda self: torch.device("privateuseone", 0))
    env._property = _PropertyHolder(lambda: RuntimeProperty(mesh=None, prng=None, autocast_dtype=None))
    torchax._env = env
    _add_cuxla_lowerings(env)
    if missing:
        log.debug("torchax names overloads this PyTorch lacks: %s", ", ".join(missing))
    return env


class _LoweringOnlyClient:
    """What `jax.jit`'s lowering reads of a device's client: its platform."""

    runtime_type = "cuxla-lowering"

    def __init__(self, platform: str):
        self.platform = platform


class _LoweringOnlyDevice:  # the name must contain "Device" for jax.default_device to take it
    def __init__(self, platform: str):
        self.client = _LoweringOnlyClient(platform)


@contextlib.contextmanager
def lowering_context(platform: str, mesh=None):
    """Tracing for `platform` ("cpu" or "cuda") without JAX devices, on
    `mesh` (a JAX AbstractMesh; default one device), with 64-bit types and
    matrix products at `matmul_precision(platform)`; on CUDA, JAX's cuDNN
    attention checks answered without JAX's GPU client."""
    import jax

    from . import _attention

    mesh = mesh if mesh is not None else abstract_mesh((1,), ("_",))
    x64 = jax.enable_x64(True) if hasattr(jax, "enable_x64") else jax.experimental.enable_x64()
    attention = _attention.lowering_for_cuda() if platform == "cuda" else contextlib.nullcontext()
    with (x64, jax.default_matmul_precision(matmul_precision(platform)), jax.sharding.use_abstract_mesh(mesh),
          jax.default_device(_LoweringOnlyDevice(platform)), attention):
        yield


def abstract_mesh(shape: tuple[int, ...], names: tuple[str, ...]):
    """A device-free JAX mesh whose axes XLA's partitioner shards
    automatically. Said explicitly: JAX 0.11's default is explicit sharding,
    under which some ops (ragged_dot) refuse to lower."""
    from jax.sharding import AbstractMesh, AxisType

    return AbstractMesh(shape, names, axis_types=(AxisType.Auto,) * len(shape))


# PyTorch's float32 matmul precisions as JAX names them: "high" allows TF32
# (or bfloat16 three times), "medium" bfloat16, where the GPU has them.
_JAX_PRECISION = {"highest": "highest", "high": "high", "medium": "default"}


def matmul_precision(platform: str) -> str:
    """JAX's precision for float32 matrix products lowered for `platform`,
    as PyTorch computes its own there: on CUDA, PyTorch's float32 matmul
    precision; on CPU, full float32."""
    if platform != "cuda":
        return "highest"
    try:
        precision = torch.get_float32_matmul_precision()
    except RuntimeError:
        # Set through PyTorch's per-backend API, which its one-word getter refuses to summarise.
        precision = "high" if torch.backends.cuda.matmul.fp32_precision == "tf32" else "highest"
    return _JAX_PRECISION[precision]


def _add_cuxla_lowerings(env, table: dict | None = None) -> None:
    from torchax import ops

    from ._lowerings import lowerings

    for target, lowering in (table if table is not None else lowerings()).items():
        env._ops[target] = ops.ops_registry.Operator(
            target, lowering, is_jax_function=True, is_user_defined=True, needs_env=False, is_view_op=False)


def has_lowering(target) -> bool:
    """Whether `target` lowers: by torchax (directly or by decomposition) or
    by cuxla (whose table grows as libraries register their custom ops)."""
    if _operator(target) is not None:
        return True
    from ._lowerings import lowerings

    lowering = lowerings().get(target)  # a library's op registered after the environment was made
    if lowering is None:
        return False
    _add_cuxla_lowerings(environment(), {target: lowering})
    return True


def lowering_name(target) -> str:
    """The qualified name of the function `target` lowers by ("" when none):
    part of what a cached lowering is keyed by."""
    op = _operator(target)
    if op is None:
        return ""
    return f"{getattr(op.func, '__module__', '')}.{getattr(op.func, '__qualname__', repr(op.func))}"


def _operator(target):
    """torchax's operator for `target` (its lowering, direct or by decomposition), or None."""
    try:
        return environment()._get_op_or_decomp(target)
    except Exception:  # torchax's OperatorNotFound, or a target it cannot look up
        return None


def drop_device_moves(graph: torch.fx.GraphModule) -> None:
    """Inside one XLA program every tensor is on the program's device: a
    copy "to" a device (what `.to(tensor.device)` traces to) is a dtype
    conversion at most, and torchax cannot name PyTorch devices."""
    moves = [node for node in graph.graph.nodes
             if node.target is torch.ops.aten._to_copy.default and "device" in node.kwargs]
    for node in moves:
        node.kwargs = {k: v for k, v in node.kwargs.items() if k != "device"}
    if moves:  # its code made again (a large graph's takes a tenth of a second)
        graph.recompile()


def jax_dtype(dtype: torch.dtype):
    from torchax.ops import mappings

    return mappings.t2j_dtype(dtype)
