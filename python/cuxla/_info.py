"""`python -m cuxla info`: what cuxla found on this machine, and why not."""
from __future__ import annotations

import importlib.metadata
import os
import shlex

import cuxla

from . import _cuxla
from ._cuxla import Client, default_platform, package_dirs


def _bytes(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


# The package of each platform's plugin: the first of plugin.cc's kKnownPlugins.
PLUGIN_PACKAGES = {"cuda": "jax-cuda13-pjrt", "cpu": "xla-cpu-pjrt"}


def _missing_plugin(platform: str) -> str:
    """The package of `platform`'s plugin, and the pip command for it: cuxla's extra
    of the platform's name (for CUDA, jax[cuda13], which brings the CUDA libraries too)."""
    requirements = []
    for line in importlib.metadata.requires("cuxla") or []:
        requirement, _, marker = line.partition(";")
        if marker.replace(" ", "").replace("'", '"') == f'extra=="{platform}"':
            requirements.append(shlex.quote(requirement.strip()))
    return f"{PLUGIN_PACKAGES[platform]} not found (pip install {' '.join(requirements)})"


def missing(platform: str) -> str | None:
    """One sentence on what `platform` lacks on this machine; None when nothing is missing."""
    if platform == "cuda":
        driver = _cuxla.cuda_driver()
        if not driver["available"]:
            return f"no GPU ({driver['why_not']})"
    if _cuxla.find_plugin(platform, package_dirs())[0] is None:
        return f"no {platform.upper()} plugin: {_missing_plugin(platform)}"
    return None


def _platform_report(platform: str) -> bool:
    """Prints one platform's plugin, client and devices; True when usable."""
    print(f"\n[{platform}]")
    found, candidates = _cuxla.find_plugin(platform, package_dirs())
    for path, outcome in candidates:
        print(f"  looked at {path}: {outcome}")
    if found is None:
        print(f"  -> no {platform} plugin: {_missing_plugin(platform)}")
        return False
    try:
        plugin = _cuxla.Plugin.load(found)
    except Exception as error:  # the plugin's own reason, verbatim
        print(f"  -> plugin not usable: {type(error).__name__}: {error}")
        return False
    major, minor = plugin.api_version
    print(f"  plugin: {plugin.path}")
    print(f"  PJRT C API: {major}.{minor}")
    for key, value in plugin.attributes():
        print(f"    {key} = {value}")
    try:
        client = Client(platform, plugin=found)
    except Exception as error:
        print(f"  -> client not created: {type(error).__name__}: {error}")
        return False
    print(f"  client: {client.platform} ({client.platform_version})")
    if platform == "cuda":
        options = client.options
        print(f"  memory options: preallocate={options['preallocate']} "
              f"memory_fraction={options['memory_fraction']} allocator={options['allocator']}")
    for device in client.devices():
        stats = client.memory_stats(device)
        memory = ("memory: not reported by the plugin" if stats is None else
                  f"memory: in use {_bytes(stats['bytes_in_use'])}, limit {_bytes(stats['bytes_limit'])}")
        print(f"  device {device.id}: {device.kind} (local_hardware_id {device.local_hardware_id}) {memory}")
        if platform == "cuda":
            stream, why_not = client._compute_stream(device)
            print(f"    imports wait for their producer on XLA's compute stream {stream:#x}" if stream else
                  f"    imports wait through PJRT's external-ready streams (slower): compute stream unknown, {why_not}")
    return True


def _version(module: str) -> str | None:
    try:
        return importlib.metadata.version(module)
    except importlib.metadata.PackageNotFoundError:
        return None


def _frameworks_report() -> None:
    """What the PyTorch side of cuxla will use, and why not when missing."""
    print("\n[frameworks]")
    torch_version = _version("torch")
    if torch_version is None:
        print("  torch: not installed (cuxla.torch and the torch.compile backend need it)")
    else:
        import torch

        fast = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")
        print(f"  torch {torch_version}: DLPack C exchange API "
              + ("found (fast handoffs)" if fast else "absent (PyTorch < 2.10: handoffs go through __dlpack__)"))
        if torch.cuda.is_available():  # whose memory XLA's programs will read and write
            settings = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF")
            print(f"  torch's CUDA allocator: {torch.cuda.memory.get_allocator_backend()}"
                  f" (PYTORCH_CUDA_ALLOC_CONF {settings or 'unset'})")
    for name, use in (("torchax", "torch.compile(backend='cuxla') lowering"), ("jax", "torchax, and bench comparisons"),
                      ("transformers", "the model zoo of bench models")):
        version = _version(name)
        print(f"  {name}: " + (version if version else f"not installed (needed for {use})"))
    if torch_version is not None and _version("jax") is not None:
        print(f"  torch.compile's attention on CUDA: {_cuda_attention()}")
        print(f"  torch.compile's graphs: {_programs()}")


def _programs() -> str:
    """How many XLA programs a compiled forward and backward run as (CUXLA_FORWARD_PROGRAMS, CUXLA_BACKWARD_PROGRAMS)."""
    try:
        import cuxla.dynamo
    except (ValueError, ImportError) as error:  # a setting that is not a number of programs; no torchax
        return str(error)
    return (f"a forward as {cuxla.dynamo.forward_programs}, a backward as {cuxla.dynamo.backward_programs} "
            f"XLA program(s) (CUXLA_FORWARD_PROGRAMS, CUXLA_BACKWARD_PROGRAMS)")


def _cuda_attention() -> str:
    """Which attention XLA runs in compiled CUDA graphs (CUXLA_ATTENTION), and why not cuDNN's."""
    from . import _attention

    try:
        chosen = _attention.implementation("cuda")
    except ValueError as error:
        return str(error)
    if chosen == "xla":
        return "XLA's own ops (CUXLA_ATTENTION=xla; cuDNN's flash attention unless so set)"
    from jax._src.lib import cuda_versions

    if cuda_versions is None:
        return "cuDNN's, but JAX's CUDA plugin libraries are not installed: XLA's own ops"
    return f"cuDNN's flash attention (cuDNN {cuda_versions.cudnn_get_version()}), where it takes the shape"


def report(only: str | None = None) -> int:
    major, minor = _cuxla.PJRT_HEADER_VERSION
    print(f"cuxla {cuxla.__version__}, built against PJRT C API {major}.{minor}")
    driver = _cuxla.cuda_driver()
    if driver["available"]:
        v = driver["version"]
        print(f"CUDA driver: {v // 1000}.{v % 1000 // 10}, {driver['device_count']} device(s)")
    else:
        print(f"CUDA driver: not available ({driver['why_not']})")
    # As loading cuxla left them (CUXLA_COMMAND_BUFFERS, CUXLA_TRITON_GEMM, CUXLA_DOT_MERGER,
    # CUXLA_AUTOTUNE_LEVEL, the user's own).
    print(f"XLA_FLAGS: {_cuxla.XLA_FLAGS or '(none)'}")
    platforms = [only] if only else list(_cuxla.known_platforms())
    usable = [p for p in platforms if _platform_report(p)]
    _frameworks_report()
    try:
        default = default_platform()  # what default_client() picks
    except Exception:  # no plugin at all: the platform reports above say why
        default = None
    print(f"\ndefault platform: {default if default in usable else 'none usable'}")
    return 0 if usable else 1
