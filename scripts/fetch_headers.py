#!/usr/bin/env python3
"""Fetch the third-party C headers cuxla builds against, from pinned registry wheels.

The headers are never committed. Each wheel is pinned by version and sha256;
only the named headers are unpacked into third_party/include. A second run
with the headers already present (e.g. on a machine with no registry, where
third_party/ was carried) does nothing.
"""
from __future__ import annotations

import argparse
import hashlib
import pathlib
import subprocess
import sys
import tempfile
import zipfile

# The PJRT C API header, its stream/layouts/FFI extensions and the XLA FFI C
# API, all from one TensorFlow CPU wheel (PJRT C API 0.90): no smaller registry
# package has the extension headers (xla-cpu-pjrt 0.0.1 ships pjrt_c_api.h 0.81
# alone, jaxlib only the FFI's c_api.h; torch-xla 2.9.0, libtpu 0.0.52 and
# jax-cuda13-pjrt none), so cuxla downloads its 261 MB once for five headers.
WHEELS = [
    {
        "requirement": "tensorflow-cpu==2.21.0",
        "file": "tensorflow_cpu-2.21.0-cp311-cp311-manylinux_2_27_x86_64.whl",
        "sha256": "2b847d217b02ee7731ed91431daf3250daa0196c3c94614d23be27232e6e5b6c",
        "headers": {
            "tensorflow/include/xla/pjrt/c/pjrt_c_api.h": "xla/pjrt/c/pjrt_c_api.h",
            "tensorflow/include/xla/pjrt/c/pjrt_c_api_stream_extension.h": "xla/pjrt/c/pjrt_c_api_stream_extension.h",
            "tensorflow/include/xla/pjrt/c/pjrt_c_api_layouts_extension.h": "xla/pjrt/c/pjrt_c_api_layouts_extension.h",
            "tensorflow/include/xla/pjrt/c/pjrt_c_api_ffi_extension.h": "xla/pjrt/c/pjrt_c_api_ffi_extension.h",
            "tensorflow/include/xla/ffi/api/c_api.h": "xla/ffi/api/c_api.h",
        },
    },
    # DLPack 1.3 (versioned tensors and the C exchange API), as shipped by tvm-ffi.
    {
        "requirement": "apache-tvm-ffi==0.1.15.post2",
        "file": "apache_tvm_ffi-0.1.15.post2-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        "sha256": "8ecebe749834f6ac0f2693d5964acf9ac75d0bc26e6ba64c46eb7ab00ea50fac",
        "headers": {"tvm_ffi/include/dlpack/dlpack.h": "dlpack/dlpack.h"},
    },
]


def sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(wheel: dict, dest: pathlib.Path) -> None:
    if all((dest / out).is_file() for out in wheel["headers"].values()):
        return
    with tempfile.TemporaryDirectory() as tmp:
        print(f"cuxla: downloading {wheel['requirement']} for its {len(wheel['headers'])} header(s), once",
              file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "on",
             "--only-binary=:all:", "--python-version", "3.11",
             "--platform", "manylinux_2_27_x86_64", "--platform", "manylinux_2_28_x86_64",
             "--dest", tmp, wheel["requirement"]],
            check=True)
        path = pathlib.Path(tmp) / wheel["file"]
        if not path.is_file():
            sys.exit(f"cuxla: pip did not produce {wheel['file']}")
        actual = sha256(path)
        if actual != wheel["sha256"]:
            sys.exit(f"cuxla: {wheel['file']} has sha256 {actual}, expected {wheel['sha256']}")
        with zipfile.ZipFile(path) as zf:
            for member, out in wheel["headers"].items():
                target = dest / out
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(member))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dest", type=pathlib.Path, help="include folder to fill")
    args = parser.parse_args()
    for wheel in WHEELS:
        fetch(wheel, args.dest)


if __name__ == "__main__":
    main()
