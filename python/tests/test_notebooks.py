"""The example notebooks run from top to bottom, headless, as a reader would run them (their own
asserts check their numbers: Muri's published JCTs within tolerance, a Python SRTF equal to the
built-in). Needs the `notebooks` extra: `pip install "./python[gym,notebooks]"`."""

from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

from conftest import ROOT

NOTEBOOKS = ROOT / "python" / "notebooks"


@pytest.mark.parametrize("name", ["muri-table.ipynb", "python-policy.ipynb"])
def test_the_notebook_runs_headless(name, tmp_path, monkeypatch):
    monkeypatch.setenv("ARBITER_ROOT", str(ROOT))
    monkeypatch.setenv("ARBITER_FIGURE", str(tmp_path / "figure.png"))
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    if name == "muri-table.ipynb":
        assert (tmp_path / "figure.png").stat().st_size > 10_000
