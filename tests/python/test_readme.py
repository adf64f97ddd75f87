"""The README's Python snippets run as written, in order, in one fresh process
(a later snippet may use what an earlier one made)."""
import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def snippets() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def test_the_readme_has_snippets():
    assert len(snippets()) >= 4


def test_every_readme_snippet_runs_verbatim(tmp_path):
    parts = []
    for i, code in enumerate(snippets()):
        parts.append(f"print('--- snippet {i + 1}', flush=True)\n{code}")
    script = tmp_path / "readme_snippets.py"
    script.write_text("\n".join(parts))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert f"--- snippet {len(snippets())}" in done.stdout
