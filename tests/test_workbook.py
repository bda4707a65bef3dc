"""nbs/workbook.ipynb runs top to bottom through a real Jupyter kernel (nbclient + ipykernel) on CPU with the network
closed and an empty package cache, and shows each step's result as rich HTML: the doctor, the translations side by
side, the translate run, the ports (rendering themselves), the audit and the benchmark, plus the benchmark's plot;
the NPU runner modules are written. Then the executed workbook is opened in a real JupyterLab in headless Chromium,
trusted and untrusted, and every view is measured: code left-aligned, monospaced, indentation kept, nothing wider
than its cell, no word broken across lines, no view naming the checkout's absolute path. Screenshots go to
tests/artifacts/ (scripts/screenshots.py takes them afresh into nbs/images/, which the workbook's docs page shows)."""
import json
import os
import re
import socket
import sys
from pathlib import Path

import pytest

from omni_npu_port.docs.site import cell_directives, find_root, nbdev_settings
from omni_npu_port.runtime.kernel import NOTEBOOK_KERNEL

ROOT = find_root(Path(__file__).parent)
SETTINGS = nbdev_settings(ROOT)
NBS = ROOT / SETTINGS["nbs_path"]
WORKBOOK = NBS / "workbook.ipynb"
KERNEL = "onp-workbook-test"
ARTIFACTS = Path(__file__).parent / "artifacts"

# The kernel runs this first: every socket connection and name lookup is written to a log, and any that leaves this
# machine fails. With the proxy variables pointing at a closed local port, a fetch (urllib, pip) cannot reach PyPI.
OFFLINE_LAUNCHER = '''import sys
LOG = {log!r}
LOCAL = ("127.0.0.1", "::1", "localhost")
def closed(event, args):
    if event == "socket.connect" and isinstance(args[1], tuple):
        where = args[1][0]
    elif event == "socket.getaddrinfo":
        where = args[0]
    else: return
    with open(LOG, "a") as f: f.write(f"{{event}} {{args[1] if event == 'socket.connect' else args[:2]!r}}\\n")
    if where not in LOCAL: raise OSError(f"the network is closed in this test ({{event}} {{where}})")
sys.addaudithook(closed)
from ipykernel import kernelapp
kernelapp.launch_new_instance()
'''


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


def closed_port() -> int:
    "A local port nothing listens on (bound, then released)."
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def offline_env(tmp: Path, out: Path) -> dict:
    "The kernel's environment: this checkout, the CPU backend, empty caches of its own, every proxy a closed port."
    proxy = f"http://127.0.0.1:{closed_port()}"
    return {"PYTHONPATH": str(ROOT), "OMNI_NPU_PORT_WORKBOOK_OUT": str(out), "OMNI_NPU_PORT_RUNTIME_BACKEND": "cpu",
            "OMNI_NPU_PORT_CACHE": str(tmp / "empty-cache"), "OMNI_NPU_PORT_SDIST_CACHE": str(tmp / "sdist-cache"),
            "OMNI_NPU_PORT_TRANSLATION_CACHE": str(tmp / "translations"),
            **{k: proxy for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")},
            "NO_PROXY": "", "no_proxy": "", "PIP_NO_INDEX": "1"}


def kernel_spec(tmp: Path, name: str, env: dict, launcher: Path | None = None) -> Path:
    "A kernelspec of this interpreter (not whatever `python3` the machine has) named `name`, with `env`."
    d = tmp / "jupyter" / "kernels" / name
    d.mkdir(parents=True)
    argv = [sys.executable, *([str(launcher)] if launcher else ["-m", "ipykernel_launcher"]), "-f", "{connection_file}"]
    (d / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": name, "language": "python", "env": env}))
    return tmp / "jupyter"


def html_of(cell) -> str:
    return "".join(o.get("data", {}).get("text/html", "") for o in cell.get("outputs", []))


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    "The workbook run through a kernel with the network closed and empty caches: (notebook, out folder, network log, tmp)."
    # imported here, not at collection: nbformat and nbclient take ~1.5 s of CPU to import in every test process
    import nbformat
    from nbclient import NotebookClient
    tmp = tmp_path_factory.mktemp("workbook")
    out, log = tmp / "out", tmp / "network.log"
    out.mkdir()
    launcher = tmp / "offline_kernel.py"
    launcher.write_text(OFFLINE_LAUNCHER.format(log=str(log)))
    env = offline_env(tmp, out)
    saved = {k: os.environ.get(k) for k in ("JUPYTER_PATH", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR")}
    os.environ.update(JUPYTER_PATH=str(kernel_spec(tmp, KERNEL, env, launcher)), JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
                      IPYTHONDIR=str(tmp / "ipython"))
    try:
        nb = runnable(nbformat.read(WORKBOOK, as_version=4))
        client = NotebookClient(nb, kernel_name=KERNEL, timeout=300, resources={"metadata": {"path": str(NBS)}})
        client.execute()      # raises CellExecutionError, with the cell and its traceback, when a cell fails
    finally:
        for k, v in saved.items():
            if v is None: os.environ.pop(k, None)
            else: os.environ[k] = v
    return nb, out, log, tmp


def test_the_workbook_names_the_projects_kernel():
    "JupyterLab opens the workbook (and every notebook) with the kernel `kernel install` registers by default."
    from omni_npu_port.runtime.kernel import default_kernel_name
    assert default_kernel_name() == NOTEBOOK_KERNEL
    for nb in sorted(NBS.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts: continue
        assert json.loads(nb.read_text())["metadata"]["kernelspec"]["name"] == NOTEBOOK_KERNEL, nb


def test_workbook_runs_offline_on_an_empty_cache_and_shows_rich_html(executed):
    nb, out, log, tmp = executed
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    # offline by construction: no connection left the machine, none even tried (no proxy), nothing fetched
    tried = log.read_text().splitlines() if log.exists() else []
    assert not tried, f"the workbook reached for the network: {tried[:5]}"
    cache = tmp / "empty-cache"
    assert not cache.exists() or not any(cache.iterdir()), f"the workbook fetched: {sorted(cache.iterdir())}"
    text = "\n".join(o.get("text", "") for c in code for o in c.outputs if o.output_type == "stream")
    assert "cannot get a release" not in text
    html = "\n".join(html_of(c) for c in code)
    for kind in ("doctor", "platform", "conformance", "translation", "run", "port", "audit", "bench", "release"):
        assert f'class="onp onp-{kind}"' in html, f"no {kind} rendering among the workbook's HTML outputs"
    assert "<script" not in html                                              # self-contained, no scripts needed
    assert html.count('class="onp onp-translation"') >= 2 and '<tr class="mark"' in html    # several files; a conflict highlighted
    assert "vLLM-Omni 0.18.0" in html and "vLLM-Omni ?" not in html          # the fixture release, never a real one
    # a PortResult renders itself: a cell whose source is just the result, with the port's HTML as its output
    own = [c for c in code if c.source.strip().startswith("ports[") and "display" not in c.source]
    assert own and 'class="onp onp-port"' in html_of(own[0])
    assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs), "the benchmark plot is missing"
    # every view has a readable text/plain twin beside its HTML
    plain = [o["data"]["text/plain"] for c in code for o in c.outputs if 'class="onp' in o.get("data", {}).get("text/html", "")]
    assert plain and all("characters)" not in t and "<td" not in t for t in plain), plain[:2]
    port_text = own[0].outputs[0]["data"]["text/plain"]           # a PortResult as text: its numbered lines, not its repr
    assert "PortResult(" not in port_text and re.search(r"^1 \| ", port_text, re.M), port_text[:300]

    npu = sorted(p.name for p in (out / "npu").glob("*.py"))
    assert len(npu) == html.count('class="onp onp-port"') and "omni_npu_model_runner.py" in npu, npu
    assert sorted(p.name for p in (out / "translated").rglob("*.py")), "the translated files were not written"
    assert (out / "bench.png").stat().st_size > 0


# ------------------------------------------------------------------------------------------------ in JupyterLab
MEASURE = """() => [...document.querySelectorAll('.jp-OutputArea-output .onp')].filter(v => !v.parentElement.closest('.onp')).map(v => {
  const cell = v.closest('.jp-OutputArea-output'), vr = v.getBoundingClientRect(), cr = cell.getBoundingClientRect();
  const cs = e => getComputedStyle(e), src = [...v.querySelectorAll('td.src')];
  const leftish = [...v.querySelectorAll('td, th')].filter(e => !e.matches('td.num, td.ln, tr.skip td'));
  return {kind: v.className, right: vr.right - cr.right, over: v.scrollWidth - v.clientWidth,
          src: src.length, src_align: [...new Set(src.map(e => cs(e).textAlign))], src_space: [...new Set(src.map(e => cs(e).whiteSpace))],
          src_mono: src.every(e => /mono/i.test(cs(e).fontFamily)), right_aligned: leftish.filter(e => cs(e).textAlign === 'right').length,
          cells: leftish.length, sideways: Math.max(0, ...[...v.querySelectorAll('.scroll')].map(s => s.scrollWidth - s.clientWidth))};
})"""


@pytest.fixture(scope="module")
def lab(executed, jupyterlab, tmp_path_factory):
    "The executed workbook in the session's JupyterLab twice: signed (trusted) and not (untrusted); its kernel added."
    import nbformat
    from nbformat.sign import NotebookNotary
    nb, out, _, _ = executed
    folder = jupyterlab.root / "workbook"
    folder.mkdir()
    nbformat.write(nb, folder / "untrusted.ipynb")
    NotebookNotary(data_dir=str(jupyterlab.data)).sign(nb)
    nbformat.write(nb, folder / "trusted.ipynb")
    # the server looks its kernel specs up on each request: one added after it started is found as a page opens
    kernel_spec(jupyterlab.tmp, NOTEBOOK_KERNEL, offline_env(tmp_path_factory.mktemp("lab"), out))
    return jupyterlab, html_views(nb)


def html_views(nb) -> int:
    "How many views (nested ones too) the executed notebook's outputs hold."
    return sum(o.get("data", {}).get("text/html", "").count('<div class="onp onp-')
               for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


from test_output_fits import WORDS_SPLIT  # noqa: E402  per view: its words, and those a line break splits

CONTROLS = """() => [...document.querySelectorAll('.jp-OutputArea-output .onp')]
  .filter(v => v.querySelector('input, select')).map(v => {
    const t = v.querySelector('.trust');
    return {kind: v.className, hint: t ? t.getClientRects().length > 0 : false, text: t ? t.textContent : ''};
  })"""


@pytest.mark.parametrize("which", ["trusted", "untrusted"])
def test_every_view_reads_well_in_jupyterlab(lab, lab_page, which):
    ("Code left-aligned, monospaced, indentation kept, wrapped inside its column; no view wider than its output cell. "
     "The trusted copy runs its kernel, as the screenshots show it; the views need none.")
    _, expected = lab
    page = lab_page.page
    assert lab_page.open(f"workbook/{which}.ipynb", 1280, 1000, kernel=which == "trusted") == (
        NOTEBOOK_KERNEL if which == "trusted" else None)
    page.wait_for_selector(".jp-OutputArea-output .onp", timeout=90_000)
    page.wait_for_function(f"document.querySelectorAll('.jp-OutputArea-output .onp').length >= {expected}",
                           timeout=60_000)
    views = page.evaluate(MEASURE)
    kinds = {v["kind"].split()[-1] for v in views}
    assert {"onp-translation", "onp-port", "onp-doctor", "onp-audit", "onp-run", "onp-release",
            "onp-bench"} <= kinds, kinds
    for v in views:
        assert v["right"] <= 1 and v["over"] <= 1, f"{which}: {v['kind']} is wider than its cell: {v}"
        assert v["right_aligned"] == 0, (f"{which}: {v['kind']}: {v['right_aligned']} of {v['cells']} text cells "
                                         "right-aligned")
        if v["src"]:
            assert v["src_align"] == ["left"] and v["src_space"] == ["pre-wrap"] and v["src_mono"], f"{which}: {v}"
    code_views = [v for v in views if v["src"]]
    assert code_views and all(v["sideways"] <= 1 for v in code_views), f"{which}: code scrolls sideways: {code_views}"
    for v in page.evaluate(WORDS_SPLIT):     # every word of every view on one line, badges and names included
        assert v["words"] > 0 and not v["split"], f"{which}: {v['kind']} breaks words: {v['split']}"
    for v in page.evaluate(CONTROLS):        # a view with controls says how to trust it, where it is not trusted
        assert v["hint"] is (which == "untrusted") and "Trust" in v["text"], f"{which}: {v}"
    shown = "\n".join(page.locator(".jp-OutputArea-output .onp").all_inner_texts())
    assert str(ROOT) not in shown and "../tests/fixtures" in shown, f"{which}: a view shows the checkout's own path"
    if which == "trusted": screenshots(page)


SHOTS = (("translation", ".onp-translation"), ("port", ".onp-port"), ("doctor", ".onp-doctor .onp-conformance"))


def screenshots(page):
    "The translation, the port and the doctor as JupyterLab shows them, into $OMNI_NPU_PORT_SCREENSHOTS or artifacts/."
    where = Path(os.environ.get("OMNI_NPU_PORT_SCREENSHOTS") or ARTIFACTS)
    where.mkdir(exist_ok=True)
    for kind, css in SHOTS:
        view = page.locator(f".jp-OutputArea-output {css}").first
        view.evaluate("e => (e.matches('.onp-conformance') ? e : e.closest('.jp-Cell'))"
                      ".scrollIntoView({block: 'start', behavior: 'instant'})")
        page.wait_for_timeout(300)
        page.screenshot(path=str(where / f"jupyterlab-{kind}.png"))
        assert (where / f"jupyterlab-{kind}.png").stat().st_size > 5_000


def screenshots_script():
    "scripts/screenshots.py, imported as a module."
    from project_scripts import load_script
    return load_script("scripts/screenshots.py")


def test_the_screenshot_script_replaces_exactly_the_images_the_docs_name_or_none(tmp_path, monkeypatch):
    "The names come from the docs (not a list in the script); one the test did not take leaves every image as it was."
    mod = screenshots_script()
    (tmp_path / "nbs" / "images").mkdir(parents=True)
    (tmp_path / "nbs" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "nbs" / "a.ipynb").write_text('{"src": "![x](images/jupyterlab-port.png) ![y](images/logo.png)"}')
    (tmp_path / "nbs" / ".ipynb_checkpoints" / "a.ipynb").write_text('"images/jupyterlab-old.png"')
    (tmp_path / "README.md").write_text("![d](nbs/images/jupyterlab-doctor.png)")
    monkeypatch.setattr(mod, "ROOT", tmp_path)
    assert mod.referenced(tmp_path) == ["jupyterlab-doctor.png", "jupyterlab-port.png"]
    old = tmp_path / "nbs" / "images" / "jupyterlab-port.png"
    old.write_bytes(b"old")
    taken = []
    def take(out, names):            # a stand-in for the JupyterLab test: writes `names` into the folder it is given
        for n in names: (out / n).write_bytes(b"new " + n.encode())
        taken.append(out)
        return 0
    monkeypatch.setattr(mod, "take", lambda out: take(out, ["jupyterlab-port.png"]))
    assert mod.main([]) == 3 and old.read_bytes() == b"old"                  # the doctor's was not taken: none replaced
    monkeypatch.setattr(mod, "take", lambda out: take(out, ["jupyterlab-port.png", "jupyterlab-doctor.png"]))
    assert mod.main([]) == 0 and old.read_bytes() == b"new jupyterlab-port.png"
    assert (tmp_path / "nbs" / "images" / "jupyterlab-doctor.png").is_file() and not taken[-1].exists()   # temp gone
    monkeypatch.setattr(mod, "take", lambda out: 1)                             # the test failed: nothing replaced
    old.write_bytes(b"old")
    assert mod.main([]) == 1 and old.read_bytes() == b"old"
