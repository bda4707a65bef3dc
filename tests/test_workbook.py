"""nbs/workbook.ipynb runs top to bottom through a real Jupyter kernel (nbclient + ipykernel) on CPU, offline, and
shows each step's result as rich HTML: the doctor, the translations side by side, the translate run, the ports
(rendering themselves), the audit and the benchmark, plus the benchmark's plot; the NPU runner modules are written."""
import json
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from omni_npu_port.docs.site import cell_directives, find_root, nbdev_settings

ROOT = find_root(Path(__file__).parent)
SETTINGS = nbdev_settings(ROOT)
NBS = ROOT / SETTINGS["nbs_path"]
WORKBOOK = NBS / "workbook.ipynb"
KERNEL = "onp-workbook-test"


def runnable(nb):
    "The notebook without the cells a test run skips: `#| eval: false`, and cells flagged with a tst_flags directive."
    flags = SETTINGS.get("tst_flags", "")
    flags = set(flags.split() if isinstance(flags, str) else flags)
    keep = []
    for c in nb.cells:
        if c.cell_type == "code":
            opts, _ = cell_directives(c.source)
            if opts.get("eval", "").lower() == "false" or flags & opts.keys(): continue
        keep.append(c)
    nb.cells = keep
    return nb


def kernel_spec(tmp: Path, out: Path) -> Path:
    "A kernelspec of this interpreter (not whatever `python3` the machine has), with the repository on its path."
    d = tmp / "jupyter" / "kernels" / KERNEL
    d.mkdir(parents=True)
    (d / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": KERNEL,
        "language": "python", "env": {"PYTHONPATH": str(ROOT), "OMNI_NPU_PORT_WORKBOOK_OUT": str(out),
                                      "OMNI_NPU_PORT_RUNTIME_BACKEND": "cpu"}}))
    return tmp / "jupyter"


def html_of(cell) -> str:
    return "".join(o.get("data", {}).get("text/html", "") for o in cell.get("outputs", []))


def test_workbook_runs_through_a_kernel_and_shows_rich_html(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("JUPYTER_PATH", str(kernel_spec(tmp_path, out)))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    nb = runnable(nbformat.read(WORKBOOK, as_version=4))
    client = NotebookClient(nb, kernel_name=KERNEL, timeout=300, resources={"metadata": {"path": str(NBS)}})
    client.execute()      # raises CellExecutionError, with the cell and its traceback, when a cell fails

    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    html = "\n".join(html_of(c) for c in code)
    for kind in ("doctor", "platform", "conformance", "translation", "run", "port", "audit", "bench"):
        assert f'class="onp onp-{kind}"' in html, f"no {kind} rendering among the workbook's HTML outputs"
    assert "<script" not in html                                              # self-contained, no scripts needed
    assert html.count('class="onp onp-translation"') >= 2 and '<tr class="mark">' in html                        # several files; a conflict highlighted
    # a PortResult renders itself: a cell whose source is just the result, with the port's HTML as its output
    own = [c for c in code if c.source.strip().startswith("ports[") and "display" not in c.source]
    assert own and 'class="onp onp-port"' in html_of(own[0])
    assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs), "the benchmark plot is missing"

    npu = sorted(p.name for p in (out / "npu").glob("*.py"))
    assert len(npu) == html.count('class="onp onp-port"') and "omni_npu_model_runner.py" in npu, npu
    assert sorted(p.name for p in (out / "translated").rglob("*.py")), "the translated files were not written"
    assert (out / "bench.png").stat().st_size > 0
