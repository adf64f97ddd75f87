"""cuxla: PyTorch tensors and XLA buffers sharing memory, and XLA programs on them.

The C++ core (``cuxla._cuxla``) does the work; this package adds the Python
conveniences: client selection, host conversion and the command line.
"""
from ._cuxla import Array, Device, Executable, Plugin, from_dlpack
from ._client import Client, asarray, compile, default_client, devices

__version__ = "0.1.0"

__all__ = [
    "Array",
    "Client",
    "Device",
    "Executable",
    "Plugin",
    "asarray",
    "compile",
    "default_client",
    "devices",
    "from_dlpack",
]
