"""One version of each pinned package throughout the project's files: the
requirements setup installs, the package's extras and the README."""
import pathlib
import re
import tomllib

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
