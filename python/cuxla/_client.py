"""Host data to device arrays, compiling and sharding, over the extension's
clients: cuxla.Client, one client per platform and the device=/client= forms
users write are _cuxla's (python/bindings/client.cc, default_clients.cc,
device.cc), named here for the rest of the package."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from . import _cuxla
from ._cuxla import as_client, as_device, client_for_platform, default_client, package_dirs  # noqa: F401


def _described(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def devices() -> list[_cuxla.Device]:
    """The default client's devices."""
    return default_client().devices()


def asarray(obj: Any, *, device: Any = None, client: Any = None) -> _cuxla.Array:
    """Copy host data (NumPy arrays, lists, scalars) to a device Array.

    dtypes are kept exactly (float64 stays float64); Python scalars take
    NumPy's default types. ``device`` (as ``from_dlpack`` takes it) defaults
    to the client's first device. A copy even on the CPU, so that later
    writes to ``obj`` are not seen: ``from_dlpack(asalignedarray(obj))`` is
    a view there instead.
    """
    if device is not None:
        device = as_device(device, client)
    if isinstance(obj, _cuxla.Array) and (device is None or obj.device == device):
        return obj
    if device is None:
        device = (as_client(client) if client is not None else default_client()).devices()[0]
    # Host memory asarray makes itself (from lists, scalars, strided arrays) is
    # made as the plugins align theirs; a contiguous NumPy array is read where
    # it is, since PJRT copies either way and its alignment costs nothing.
    if isinstance(obj, np.ndarray) and obj.flags.c_contiguous:
        host = obj
    else:
        host = asalignedarray(obj)  # its dtype is checked by _from_host
    return _cuxla._from_host(host.ctypes.data, host.dtype.name, list(host.shape), device)


def asalignedarray(obj: Any, dtype: Any = None) -> np.ndarray:
    """A C-contiguous NumPy array of ``obj`` in memory that the CPU plugin can
    view: ``from_dlpack`` imports it without a copy, and writes to it are seen
    by XLA.

    NumPy aligns data to 16 bytes, the CPU plugin views only 64-byte aligned
    memory (``from_dlpack`` copies other NumPy arrays, or refuses them under
    ``copy=False``). As ``numpy.ascontiguousarray`` does, returns ``obj``
    itself when it qualifies already (an empty array always does: there is
    no memory to view), else a copy.
    """
    host = np.asarray(obj, dtype=dtype)
    alignment = _cuxla._buffer_alignment("cpu")
    if host.size == 0 or (host.flags.c_contiguous and host.ctypes.data % alignment == 0):
        return host
    raw = np.empty(host.nbytes + alignment, np.uint8)
    start = -raw.ctypes.data % alignment
    aligned = raw[start:start + host.nbytes].view(host.dtype).reshape(host.shape)
    aligned[...] = host
    return aligned


def compile(program: str | bytes, *, client: Any = None,
            mesh: _cuxla.Mesh | None = None) -> _cuxla.Executable:
    """Compile StableHLO (MLIR text or bytecode) for the client's first device,
    or with ``mesh`` as an SPMD program with one partition per mesh device
    (call it with ``call_sharded`` on ShardedArrays).

    The same program on the same client returns the same Executable.
    """
    if isinstance(program, str):
        program = program.encode()
    if not isinstance(program, (bytes, bytearray, memoryview)):
        raise TypeError(f"program must be str or bytes, not {type(program).__name__}")
    if client is not None:
        client = as_client(client)
    if mesh is not None:
        return _cuxla._compile_for(bytes(program), mesh, client)
    return (client or default_client())._compile(bytes(program))


def shard(parts: Iterable[Any], mesh: _cuxla.Mesh, spec: Iterable[str | None]) -> _cuxla.ShardedArray:
    """One array split over ``mesh`` as ``spec`` says (per dimension, the mesh
    axis it is split over, or None), from its shards: ``parts[i]``, a cuxla
    Array or any DLPack tensor, is the tile of mesh device i, imported onto
    that device (zero-copy when it is there already)."""
    if isinstance(parts, (_cuxla.Array, str)) or not hasattr(parts, "__iter__"):
        raise TypeError(f"shard takes the shards as a sequence, one per mesh device, not a {_described(parts)}")
    parts = list(parts)
    devices = mesh.devices
    if len(parts) != len(devices):
        raise ValueError(f"{len(parts)} shards given for a mesh of {len(devices)} devices")
    arrays = [p if isinstance(p, _cuxla.Array) else _cuxla.from_dlpack(p, device=d) for p, d in zip(parts, devices)]
    if isinstance(spec, str):
        raise TypeError(f"spec names a mesh axis or None per dimension, as in [{spec!r}, None], not the str {spec!r}")
    return _cuxla._shard(arrays, mesh, list(spec))
