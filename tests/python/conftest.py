"""Fixtures: one client per platform whose plugin is installed.

CUXLA_TEST_PLATFORMS (comma-separated) names the platforms to test; by default
every known platform whose plugin is found. A run with no usable platform
fails rather than passing empty.
"""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

import pytest

# A JAX imported by a test must not take 75% of the GPU up front.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# The tests' executables, and AOTAutograd's graphs (in inductor's folder), go
# to caches of their own (which they thus exercise), not the user's; removed at exit.
for variable, prefix in (("CUXLA_CACHE_DIR", "cuxla-test-cache-"), ("TORCHINDUCTOR_CACHE_DIR", "torch-test-cache-")):
    if variable not in os.environ:
        os.environ[variable] = tempfile.mkdtemp(prefix=prefix)
        atexit.register(shutil.rmtree, os.environ[variable], True)

import cuxla
from cuxla import _cuxla

if os.environ.get("CUXLA_ONE_POOL") == "1" and _cuxla.cuda_driver()["available"]:
    # The suite with PyTorch's CUDA allocations in XLA's pool, set before any test touches CUDA.
    from cuxla import _torch_memory

    _torch_memory.use_xla_allocator_if_asked()


def _platforms() -> list[str]:
    wanted = os.environ.get("CUXLA_TEST_PLATFORMS")
    if wanted:
        return [p.strip() for p in wanted.split(",") if p.strip()]
    dirs = [p for p in sys.path if p]
    found = [p for p in _cuxla.known_platforms() if _cuxla.find_plugin(p, dirs)[0]]
    if "cuda" in found and not _cuxla.cuda_driver()["available"]:
        found.remove("cuda")
    return found


PLATFORMS = _platforms()
if not PLATFORMS:
    raise RuntimeError("no PJRT plugin found to test against (install xla-cpu-pjrt)")

@pytest.fixture(params=PLATFORMS)
def client(request) -> cuxla.Client:
    """The process-wide client of each tested platform: the one DLPack
    imports of that platform's tensors go to."""
    return cuxla._client.client_for_platform(request.param)


@pytest.fixture
def device(client):
    return client.devices()[0]
