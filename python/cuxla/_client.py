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
        if platform is not None:
            platform = platform_name(platform, plugin_given=plugin is not None)
        for name, value, kinds, expected in (
            ("preallocate", preallocate, bool, "None, True or False"),
            ("memory_fraction", memory_fraction, (int, float), "None or a number"),
            ("allocator", allocator, str, "None or an allocator's name"),
            ("device_count", device_count, int, "None or an int"),
        ):
            if value is not None and (not isinstance(value, kinds) or isinstance(value, bool) and kinds is not bool):
                raise TypeError(f"{name} must be {expected}, not a {_described(value)}")
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

    def memory_stats(self, device: Any = None) -> dict[str, int | None] | None:
        """The device allocator's statistics, or None where the plugin has none."""
        return self._core.memory_stats(self.devices()[0] if device is None else as_device(device, self))

    def __repr__(self) -> str:
        return f"cuxla.Client({self.platform!r}, devices={len(self.devices())}, plugin={self.plugin!r})"


# What users call platforms, in any case: JAX says "gpu" where PJRT says "cuda".
_PLATFORMS = {"cpu": "cpu", "cuda": "cuda", "gpu": "cuda"}


def _described(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def platform_name(name: Any, *, plugin_given: bool = False) -> str:
    """The platform cuxla means by `name` ("cpu", "cuda", "gpu", any case);
    with a plugin path given, any name passes (lower-cased)."""
    if not isinstance(name, str):
        raise TypeError(f"a platform is a name such as 'cuda' or 'cpu', not a {_described(name)}")
    platform = _PLATFORMS.get(name.lower())
    if platform is not None:
        return platform
    if plugin_given:
        return name.lower()
    raise ValueError(f"cuxla knows the platforms 'cpu' and 'cuda' (or 'gpu'), not {name!r}; "
                     "pass plugin= for another")


def as_client(client: Any) -> Client:
    """`client` as a Client: a Client, or a platform name for that platform's default client."""
    if isinstance(client, Client):
        return client
    if isinstance(client, str):
        return client_for_platform(platform_name(client))
    raise TypeError(f"client must be a cuxla.Client or a platform name such as 'cuda', not a {_described(client)}")


def _is_torch_device(value: Any) -> bool:
    return type(value).__module__ == "torch" and type(value).__name__ == "device"


def as_device(device: Any, client: Any = None) -> _cuxla.Device:
    """`device` as a cuxla Device, from what PyTorch and JAX users pass: a
    Device; "cuda", "cuda:1", "cpu", "gpu:0" (any case) or a torch.device,
    index meaning the CUDA ordinal (without one, PyTorch's current CUDA device
    if PyTorch has one, else the first); an int, the index among the devices
    of `client` (else of the default client)."""
    if isinstance(device, _cuxla.Device):
        return device
    chosen = as_client(client) if client is not None else None
    if isinstance(device, int) and not isinstance(device, bool):
        chosen = chosen or default_client()
        devices = chosen.devices()
        if not 0 <= device < len(devices):
            raise ValueError(f"device {device} does not exist: the {chosen.platform} client has "
                             f"{len(devices)} device(s)")
        return devices[device]
    if not isinstance(device, str) and not _is_torch_device(device):
        raise TypeError("device must be a cuxla.Device, a torch.device, a name such as 'cuda:0' or an int, "
                        f"not a {_described(device)}")
    name, _, index_text = str(device).partition(":")
    platform = platform_name(name)
    if index_text and not index_text.isdigit():
        raise ValueError(f"device {str(device)!r} has no index after ':'; write e.g. '{platform}:0'")
    index = int(index_text) if index_text else _current_index(platform)
    if chosen is not None and chosen.platform != platform:
        raise ValueError(f"device {str(device)!r} is not a device of the {chosen.platform} client")
    chosen = chosen or client_for_platform(platform)
    devices = chosen.devices()
    if platform == "cuda":  # PyTorch's ordinal, whatever devices the client was made to see
        found = [d for d in devices if d.local_hardware_id == index]
    else:
        found = [d for d in devices if d.id == index]
    if not found:
        raise ValueError(f"device {str(device)!r} does not exist: the {platform} client has "
                         f"{', '.join(repr(d) for d in devices)}")
    return found[0]


def _current_index(platform: str) -> int:
    torch = sys.modules.get("torch")
    if platform == "cuda" and torch is not None and torch.cuda.is_initialized():
        return torch.cuda.current_device()
    return 0


def import_target(device: Any, client: Any) -> tuple[_cuxla.Device | None, Client | None]:
    """from_dlpack's device= and client=, resolved (its slow path: anything
    but a Device and a Client)."""
    target = as_device(device, client) if device is not None else None
    return target, as_client(client) if client is not None else None


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
        return _cuxla._compile_for(bytes(program), mesh, client._core if client is not None else None)
    return (client or default_client())._core._compile(bytes(program))


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
