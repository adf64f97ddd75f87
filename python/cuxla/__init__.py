"""cuxla: PyTorch tensors and XLA buffers sharing memory, and XLA programs on them.

The C++ core (``cuxla._cuxla``) does the work; this package adds the Python
conveniences: client selection, host conversion and the command line.
"""
from ._cuxla import Array, Device, Executable, Mesh, Plugin, ShardedArray, from_dlpack
from ._client import Client, asarray, compile, default_client, devices, shard

__version__ = "0.1.0"

__all__ = [
    "Array",
    "Client",
    "Device",
    "Executable",
    "Mesh",
    "Plugin",
    "ShardedArray",
    "asarray",
    "compile",
    "default_client",
    "devices",
    "from_dlpack",
    "shard",
]
