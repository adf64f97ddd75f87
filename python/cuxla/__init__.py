"""cuxla: PyTorch tensors and XLA buffers sharing memory, and XLA programs on them.

The C++ core (``cuxla._cuxla``) does the work, clients included; this package
adds the Python conveniences: host conversion, compiling, PyTorch's side and
the command line.
"""
from ._cuxla import (Array, Client, CompileError, Device, Executable, Mesh, NoDeviceError, Plugin, ShardedArray,
                     default_client, from_dlpack)
from ._client import asalignedarray, asarray, compile, devices, shard
from . import _cuxla

# Loading _cuxla put XLA's log level (CUXLA_LOG) and flags (CUXLA_COMMAND_BUFFERS,
# CUXLA_TRITON_GEMM, CUXLA_DOT_MERGER, CUXLA_AUTOTUNE_LEVEL) into the process
# environment; os.environ, a copy taken at startup, is told too, so that
# `import jax` keeps the level rather than setting a default of its own, and
# children given os.environ see both.
import os as _os

if _cuxla.TF_CPP_MIN_LOG_LEVEL is not None:
    _os.environ["TF_CPP_MIN_LOG_LEVEL"] = _cuxla.TF_CPP_MIN_LOG_LEVEL
if _cuxla.XLA_FLAGS is not None:
    _os.environ["XLA_FLAGS"] = _cuxla.XLA_FLAGS

__version__ = "0.1.0"


def __getattr__(name: str):
    # cuxla.dynamo, cuxla.torch and cuxla.parallel import PyTorch: loaded on first use.
    if name in ("dynamo", "torch", "parallel"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'cuxla' has no attribute {name!r}")

__all__ = [
    "Array",
    "Client",
    "CompileError",
    "Device",
    "Executable",
    "Mesh",
    "NoDeviceError",
    "Plugin",
    "ShardedArray",
    "asalignedarray",
    "asarray",
    "compile",
    "default_client",
    "devices",
    "from_dlpack",
    "shard",
]
