"""Clients, the default client, and host data to device arrays."""
from __future__ import annotations

import functools
import os
import sys
import threading
from typing import Any, Iterable

import numpy as np

from . import _cuxla


def package_dirs() -> list[str]:
    """Where installed Python packages (and so PJRT plugins) may be."""
    return [p for p in sys.path if p]


class Client:
    """A PJRT client on one platform ("cuda" or "cpu").

    ``platform=None`` picks CUDA when a GPU and the CUDA plugin are present,
    else CPU. ``plugin`` is a path to a PJRT plugin, overriding discovery.
    The memory options apply to CUDA only; ``None`` means "from the
    environment (CUXLA_PREALLOCATE, CUXLA_MEM_FRACTION, CUXLA_ALLOCATOR), else
    the default", and the default never preallocates. ``device_count`` sets
    a CPU client's number of devices (else CUXLA_CPU_DEVICE_COUNT, else the plugin's default).
    ``num_nodes`` > 1 makes one CUDA client of several processes, this one
    being ``node_id``; they find each other through ``kv_store``, a
    ``torch.distributed.Store`` (see ``cuxla.torch.distributed_client``).
    """

    def __init__(
        self,
        platform: str | None = None,
        *,
        plugin: str | os.PathLike | None = None,
        preallocate: bool | None = None,
        memory_fraction: float | None = None,
        allocator: str | None = None,
        visible_devices: Iterable[int] | None = None,
        device_count: int | None = None,
        node_id: int = 0,
        num_nodes: int = 1,
        kv_store: Any = None,
    ) -> None:
        chosen, path = _cuxla.choose_plugin(
            platform or "", os.fspath(plugin) if plugin is not None else "", package_dirs()
        )
        self._core = _cuxla._Client.create(
            path, chosen, preallocate, memory_fraction, allocator, list(visible_devices or []), device_count,
            node_id, num_nodes, kv_store,
        )

    @property
    def platform(self) -> str:
        return self._core.platform

    @property
    def platform_version(self) -> str:
        return self._core.platform_version

    @property
    def plugin(self) -> str:
        """Path of the PJRT plugin this client was made from."""
        return self._core.plugin

    @property
    def api_version(self) -> tuple[int, int]:
        """The plugin's PJRT C API version, (major, minor)."""
        return self._core.api_version

    @property
    def options(self) -> dict[str, Any]:
        """The options in force (after the environment)."""
        return self._core.options

    def devices(self) -> list[_cuxla.Device]:
        """This process's devices."""
        return self._core.devices()

    @property
    def global_device_count(self) -> int:
        """The devices of every process of the client."""
        return self._core.global_device_count

    def memory_stats(self, device: _cuxla.Device | None = None) -> dict[str, int | None] | None:
        """The device allocator's statistics, or None where the plugin has none."""
        return self._core.memory_stats(device if device is not None else self.devices()[0])

    def __repr__(self) -> str:
        return f"cuxla.Client({self.platform!r}, devices={len(self.devices())}, plugin={self.plugin!r})"


_clients_lock = threading.Lock()
_platform_clients: dict[str, Client] = {}


def client_for_platform(platform: str) -> Client:
    """The process-wide client of `platform`, made on first use: the default
    client when it is of that platform, and where DLPack imports of that
    platform's tensors go unless told otherwise."""
    with _clients_lock:
        if platform not in _platform_clients:
            _platform_clients[platform] = Client(platform)
        return _platform_clients[platform]


@functools.cache
def _default_platform() -> str:
    platform, _ = _cuxla.choose_plugin("", "", package_dirs())
    return platform


def default_client() -> Client:
    """The client made on first use: CUDA if a GPU and its plugin are there, else CPU."""
    return client_for_platform(_default_platform())


def devices() -> list[_cuxla.Device]:
    """The default client's devices."""
    return default_client().devices()


def asarray(obj: Any, *, device: _cuxla.Device | None = None, client: Client | None = None) -> _cuxla.Array:
    """Copy host data (NumPy arrays, lists, scalars) to a device Array.

    dtypes are kept exactly (float64 stays float64); Python scalars take
    NumPy's default types. ``device`` defaults to the client's first device.
    """
    if isinstance(obj, _cuxla.Array) and (device is None or obj.device == device):
        return obj
    if device is None:
        device = (client or default_client()).devices()[0]
    host = np.asarray(obj, order="C")  # its dtype is checked by _from_host
    return _cuxla._from_host(host.ctypes.data, host.dtype.name, list(host.shape), device)


def compile(program: str | bytes, *, client: Client | None = None,
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
    if mesh is not None:
        if client is None:
            client = client_for_platform(mesh.devices[0].platform)
        return _cuxla._compile_for(client._core, bytes(program), mesh)
    return (client or default_client())._core._compile(bytes(program))


def shard(parts: Iterable[Any], mesh: _cuxla.Mesh, spec: Iterable[str | None]) -> _cuxla.ShardedArray:
    """One array split over ``mesh`` as ``spec`` says (per dimension, the mesh
    axis it is split over, or None), from its shards: ``parts[i]``, a cuxla
    Array or any DLPack tensor, is the tile of mesh device i, imported onto
    that device (zero-copy when it is there already)."""
    parts = list(parts)
    devices = mesh.devices
    if len(parts) != len(devices):
        raise ValueError(f"{len(parts)} shards given for a mesh of {len(devices)} devices")
    arrays = [p if isinstance(p, _cuxla.Array) else _cuxla.from_dlpack(p, device=d) for p, d in zip(parts, devices)]
    return _cuxla._shard(arrays, mesh, list(spec))
