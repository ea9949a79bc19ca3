"""The sweep notebooks run top to bottom in a fresh kernel of this interpreter, and are committed clean."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import ipykernel  # noqa: F401  (the kernel the notebooks run in)
import nbclient
import nbformat
import pytest

# nbformat, nbclient and ipykernel are in the [test] extra: without them these tests fail, never skip.

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ["cluster_scaling", "sparsity", "training_numerics", "faults"]
KERNEL = "wss-sweep-tests"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """A kernelspec for this interpreter in a private JUPYTER_PATH: no network, no user configuration."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "data" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": KERNEL, "language": "python"}))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_PATH", str(root / "data"))
        mp.setenv("JUPYTER_CONFIG_DIR", str(root / "config"))
        mp.setenv("JUPYTER_RUNTIME_DIR", str(root / "runtime"))
        mp.setenv("JUPYTER_PLATFORM_DIRS", "1")  # silences jupyter_core's migration DeprecationWarning
        mp.setenv("IPYTHONDIR", str(root / "ipython"))
        mp.delenv("MPLBACKEND", raising=False)
        yield KERNEL


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_committed_without_outputs(name):
    book = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(book)
    for cell in book.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}: clear the outputs"


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_top_to_bottom(name, kernel):
    book = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        book, kernel_name=kernel, timeout=120, resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()  # wall time is reported by benchmarks, not asserted here (the machine is noisy)
    images = [o for c in book.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert images, "the figures should display"
    errors = [o for c in book.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    # no warning on the notebook's stderr (tqdm's "IProgress not found" without ipywidgets, among others)
    warned = [o.get("text", "") for c in book.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "stream" and o.get("name") == "stderr" and "Warning" in o.get("text", "")]
    assert not warned, warned
