"""The README's Python snippets run as written, in order, in one fresh process
(a later snippet may use what an earlier one made); a snippet that begins
with "# A process of its own" runs alone, in a fresh process of its own."""
import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def snippets() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def test_the_readme_has_snippets():
    assert len(snippets()) >= 4


ALONE = "# A process of its own"


def _run(script: pathlib.Path, code: str) -> str:
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], cwd=script.parent, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_every_readme_snippet_runs_verbatim(tmp_path):
    together = [(i, code) for i, code in enumerate(snippets()) if not code.startswith(ALONE)]
    alone = [(i, code) for i, code in enumerate(snippets()) if code.startswith(ALONE)]
    parts = [f"print('--- snippet {i + 1}', flush=True)\n{code}" for i, code in together]
    out = _run(tmp_path / "readme_snippets.py", "\n".join(parts))
    assert f"--- snippet {together[-1][0] + 1}" in out
    for i, code in alone:
        _run(tmp_path / f"readme_snippet_{i + 1}.py", code)
