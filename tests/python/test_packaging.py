"""One version of each pinned package throughout the project's files: the
requirements setup installs, the package's extras and the README; and no
name the package uses is undefined, in paths CPU runs never take too."""
import pathlib
import re
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PIN = re.compile(r"^\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*==\s*([^\s;#]+)")


def pins_in(lines) -> list[tuple[str, str, str]]:
    found = []
    for line in lines:
        m = PIN.match(line)
        if m:
            found.append((m.group(1).lower().replace("_", "-"), m.group(3), line.strip()))
    return found


def every_pin() -> dict[str, set[str]]:
    sources = {}
    for name in ("requirements-dev.txt", "requirements-cuda.txt"):
        sources[name] = pins_in((ROOT / name).read_text().splitlines())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for extra, requirements in project["optional-dependencies"].items():
        sources[f"pyproject [{extra}]"] = pins_in(requirements)
    versions: dict[str, set[str]] = {}
    for source, pins in sources.items():
        for package, version, _ in pins:
            versions.setdefault(package, set()).add(f"{version} ({source})")
    return versions


def test_each_package_is_pinned_to_one_version():
    for package, versions in every_pin().items():
        assert len({v.split()[0] for v in versions}) == 1, f"{package} is pinned to {sorted(versions)}"


def test_the_cuda_plugin_is_at_the_version_of_jax():
    versions = {p: {v.split()[0] for v in vs} for p, vs in every_pin().items()}
    assert versions["jax"], "jax is not pinned"
    (jax_version,) = versions["jax"]
    readme = (ROOT / "README.md").read_text()
    assert f"jax[cuda13]=={jax_version}" in (ROOT / "requirements-cuda.txt").read_text()
    assert re.search(rf"\| cuda \|.*{re.escape(jax_version)}", readme), "README's plugin table names another jax"


def test_the_package_uses_no_undefined_name():
    # Branches only a GPU takes (CUDA memory, the pool, GPU benchmarks) run nowhere in CI: a
    # name missing there would first fail on the device machine.
    pyflakes = pytest.importorskip("pyflakes.api", reason="pyflakes is in requirements-dev.txt; the device has no registry")
    from pyflakes import messages, reporter

    found: list[str] = []

    class Collect(reporter.Reporter):
        def __init__(self):
            super().__init__(None, None)

        def flake(self, message):
            if isinstance(message, (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)):
                found.append(str(message))

        def syntaxError(self, filename, msg, lineno, offset, text):
            found.append(f"{filename}:{lineno}: {msg}")

    files = sorted(str(p) for p in (ROOT / "python" / "cuxla").rglob("*.py"))
    pyflakes.checkRecursive(files, Collect())
    assert not found, "\n".join(found)
