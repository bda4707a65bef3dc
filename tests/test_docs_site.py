"""Build the docs site from a copy of the project holding the notebooks whose pages these tests read, and look at it in
headless Chromium. The whole site (every notebook a page, the sidebar linking each in order, no tracked file changed) is
built and checked by .ci/run's docs step, with the same checks (tests/site_checks.py).

Needs Debian's chromium (`apt-get install -y chromium`; scripts/setup.sh installs it where the machine allows). Without
it the browser tests are skipped with the reason, except under CI (`CI` set, as .ci/run sets it), where they fail.
The screenshot goes to tests/artifacts/catalog.png.
"""
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from checkout_helpers import ignored_by, tracked_files
from site_checks import SIDEBAR_PAGE, build_problems, committed, pages_missing, sidebar_hrefs, sidebar_problems

from omni_npu_port.core.catalog import CATALOG, FAMILIES
from omni_npu_port.docs.site import build_site, docs_location, find_root, nbdev_settings, notebooks

ROOT = find_root(Path(__file__).parent)
SETTINGS = nbdev_settings(ROOT)
ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM = os.environ.get("OMNI_NPU_PORT_CHROMIUM", "/usr/bin/chromium")   # the browser to drive (a test points it elsewhere)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
STEPS: list = []   # what build_site said while it worked
COPIED = [SETTINGS["nbs_path"], SETTINGS["lib_path"], "pyproject.toml", "settings.ini", "_quarto.yml"]
# the notebooks whose pages the tests read (the home page, the workbook, the catalog, the codes page, each family's);
# the copy holds only these (a third of the whole site's build), every other file of nbs/ as it is
PAGES_READ = {"index.ipynb", "workbook.ipynb", "core/catalog.ipynb", "docs/codes.ipynb",
              *(nb for _, nb in FAMILIES.values())}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    ("The site built from a copy of the project with the notebooks of PAGES_READ (the checkout's own nbs/ and _docs/ "
     "are left alone).")
    work = tmp_path_factory.mktemp("project")
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, work / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
        elif src.exists(): shutil.copy2(src, work / name)
    for nb in notebooks(work):
        if nb.as_posix() not in PAGES_READ: (work / SETTINGS["nbs_path"] / nb).unlink()
    t0 = time.monotonic()
    # jobs=1: nbdev processes the notebooks in its one child, no pool (the other test worker has the other core);
    # the pool, the default, builds the tiny site of nbs/docs/site.ipynb under test_notebooks
    out = build_site(work, progress=STEPS.append, jobs=1)
    print(f"site built in {time.monotonic() - t0:.1f} s")
    return work, out


def test_the_build_says_each_step_as_it_goes(site):
    "No long silence: the sidebar, the renderer's steps and the move into place are each announced."
    assert STEPS[0].endswith("writing the sidebar") and STEPS[-1].startswith("moving the site into")
    assert any("render" in s for s in STEPS) and len(STEPS) >= 3


def test_the_build_changes_no_tracked_file_and_leaves_only_ignored_ones(site):
    ("`omni-npu-port docs` on a fresh clone: every tracked file it read is as it was (but the sidebar, written for the "
     "copy's notebooks); what it adds is ignored by git.")
    work, _ = site
    left_out = {f"{SETTINGS['nbs_path']}/{nb.as_posix()}" for nb in notebooks(ROOT)} - {
        f"{SETTINGS['nbs_path']}/{nb}" for nb in PAGES_READ} | {f"{SETTINGS['nbs_path']}/sidebar.yml"}
    tracked = [t for t in tracked_files(ROOT) if t.split("/")[0] in COPIED and t not in left_out]
    changed = [t for t in tracked if (ROOT / t).is_file() and not (ROOT / t).is_symlink()
               and (work / t).read_bytes() != (ROOT / t).read_bytes()]
    assert not changed, f"the docs build changed tracked files: {changed}"
    new = sorted(str(p.relative_to(work)) for name in COPIED if (work / name).is_dir() for p in (work / name).rglob("*")
                 if p.is_file() and "__pycache__" not in p.parts and not (ROOT / p.relative_to(work)).exists())
    ignored = ignored_by(ROOT, new)
    assert [n for n in new if n not in ignored] == [], "the docs build left files git would see as new"


def test_every_notebook_is_a_page(site):
    work, out = site
    assert out == work / SETTINGS["doc_path"] and docs_location(work) == out / "index.html"
    assert sorted(nb.as_posix() for nb in notebooks(work)) == sorted(PAGES_READ)
    missing = pages_missing(work, out)
    assert not missing, f"notebooks without a page in the built site: {missing}"


def test_sidebar_links_every_page_in_order(browser, site):
    "The sidebar a browser shows links every page in SIDEBAR's order; .ci/run reads the same links from the HTML."
    work, out = site
    page = browser.new_page()
    page.goto((out / SIDEBAR_PAGE).as_uri())
    hrefs = page.eval_on_selector_all("#quarto-sidebar a.sidebar-link[href]", "els => els.map(e => e.getAttribute('href'))")
    page.close()
    assert hrefs and sidebar_hrefs((out / SIDEBAR_PAGE).read_text(encoding="utf-8")) == hrefs
    assert sidebar_problems(work, hrefs) == []


def test_the_site_checks_find_a_sidebar_out_of_order_a_missing_page_and_a_build_that_changes_files(site, tmp_path):
    "The checks .ci/run makes on the whole site fire: a page dropped, two swapped; a file changed, a new one unignored."
    work, out = site
    assert pages_missing(work, tmp_path) == [str(nb.with_suffix(".html")) for nb in notebooks(work)]   # no site there
    hrefs = sidebar_hrefs((out / SIDEBAR_PAGE).read_text(encoding="utf-8"))
    assert any("notebooks with a page but no sidebar entry" in p for p in sidebar_problems(work, hrefs[1:]))
    assert any("order" in p for p in sidebar_problems(work, [hrefs[1], hrefs[0], *hrefs[2:]]))
    (tmp_path / ".gitignore").write_text("_docs/\n")
    (tmp_path / "nbs").mkdir()
    (tmp_path / "nbs" / "a.ipynb").write_text("{}")
    (tmp_path / "nbs" / "b.ipynb").write_text("{}")
    before = committed(tmp_path)
    assert set(before) == {".gitignore", "nbs/a.ipynb", "nbs/b.ipynb"} and build_problems(tmp_path, before) == []
    (tmp_path / "nbs" / "a.ipynb").write_text("{ }")
    (tmp_path / "nbs" / "b.ipynb").unlink()
    (tmp_path / "_docs").mkdir()
    (tmp_path / "_docs" / "a.html").write_text("")   # ignored: fine
    (tmp_path / "nbs" / "new.yml").write_text("")
    assert build_problems(tmp_path, before) == [
        "the docs build changed nbs/a.ipynb", "the docs build changed nbs/b.ipynb",
        "the docs build left files git would see as new: ['nbs/new.yml']"]


def test_catalog_page_shows_every_pattern(browser, site):
    work, out = site
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto((out / "core" / "catalog.html").as_uri())
    text = page.inner_text("body")
    missing = [p.id for p in CATALOG if p.id not in text]
    assert not missing, f"pattern ids not visible on catalog.html: {missing}"
    table = page.locator("table", has_text=CATALOG.patterns[-1].id).first
    assert table.is_visible(), "the pattern table is not visible on catalog.html"
    ARTIFACTS.mkdir(exist_ok=True)
    table.evaluate("e => e.scrollIntoView({block: 'start', behavior: 'instant'})")  # the theme scrolls smoothly
    page.evaluate("window.scrollBy({top: -80, behavior: 'instant'})")  # keep the header row clear of the navbar
    page.screenshot(path=str(ARTIFACTS / "catalog.png"))
    page.screenshot(path=str(ARTIFACTS / "catalog-full.png"), full_page=True)
    assert (ARTIFACTS / "catalog.png").stat().st_size > 10_000
    page.close()


def test_every_family_page_shows_its_records(browser, site):
    "Each family notebook's page shows the records of its family (its show_records table)."
    work, out = site
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    for fam, (_, nb) in FAMILIES.items():
        page.goto((out / nb.replace(".ipynb", ".html")).as_uri())
        text = page.inner_text("body")
        missing = [p.id for p in CATALOG.select(family=fam) if p.id not in text]
        assert not missing, f"{nb}: records of family {fam} not visible on its page: {missing}"
    page.close()


def test_the_pattern_table_filters_in_a_browser_and_never_breaks_a_word(browser, tmp_path):
    "docs.render's pattern table in Chromium: search and selectors hide rows; no code cell breaks mid-word."
    from omni_npu_port.docs.render import html_pattern_table
    f = tmp_path / "patterns.html"
    f.write_text(f"<!doctype html><meta charset=utf-8><body>{html_pattern_table()}</body>")
    page = browser.new_page(viewport={"width": 1000, "height": 800})
    page.goto(f.as_uri())
    shown = lambda: page.locator("tbody tr:visible").count()
    assert shown() == len(CATALOG)
    page.fill("input[name=q]", "set_forward_context")
    assert 0 < shown() < len(CATALOG) and all("set_forward_context" in t for t in page.locator("tbody tr:visible").all_inner_texts())
    page.fill("input[name=q]", "")
    page.select_option("select[name=family]", CATALOG.patterns[0].family)
    assert shown() == len(CATALOG.select(family=CATALOG.patterns[0].family))
    page.select_option("select[name=family]", "")
    page.select_option("select[name=holds]", "0.18.0")
    assert shown() == len(CATALOG.select(vllm_ascend="0.18.0"))
    # a code cell is one line tall: nothing inside a symbol wraps (the table scrolls sideways instead)
    heights = page.eval_on_selector_all("td.nw", "els => els.map(e => { const r = document.createRange(); r.selectNodeContents(e); return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size; })")
    assert heights and max(heights) == 1
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "pattern-table.png"))
    page.close()


def test_the_workbook_page_shows_its_steps(browser, site):
    "The porting workbook is a page of the site, its steps in order; a screenshot of it goes to the artifacts."
    work, out = site
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto((out / "workbook.html").as_uri())
    text = page.inner_text("body")
    steps = [w for w in ("doctor", "translate", "port", "audit", "bench") if w in text.lower()]
    assert steps == ["doctor", "translate", "port", "audit", "bench"], steps
    shots = page.eval_on_selector_all("img[src*='jupyterlab-']", "els => els.map(e => [e.getAttribute('src'), e.naturalWidth])")
    assert len(shots) == 3 and all(w > 0 for _, w in shots), f"the JupyterLab screenshots on the workbook page: {shots}"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "workbook.png"))
    assert (ARTIFACTS / "workbook.png").stat().st_size > 10_000
    page.close()


def printed_links(work: Path, tmp: Path) -> set[str]:
    "Every link to a page the tools print (translate's report and check formats, the tour's translate), run in `work`."
    import contextlib
    import io
    from types import SimpleNamespace
    from rich.console import Console
    from omni_npu_port.cli.main import main
    from omni_npu_port.translate.run import tour_translate
    src = tmp / "runner.py"
    src.write_text("import torch\n\n\ndef f(x):\n    torch.cuda.synchronize()\n    with torch.cuda.graph(g):\n        y = x\n")

    def run(*args):   # the command in this process, in `work` as a user there runs it (no interpreter start each)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err): main(list(args))
        return SimpleNamespace(stdout=out.getvalue(), stderr=err.getvalue())
    con = Console(file=io.StringIO(), width=400)
    cwd = os.getcwd()
    os.chdir(work)
    try:
        texts = [run("translate", str(src), "--diff", "--report", str(tmp / "r.json")).stderr,
                 (tmp / "r.json").read_text()]
        texts += [run("translate", str(src), "--check", "--output-format", f).stdout
                  for f in ("json", "sarif", "github", "text")]
        tour_translate(con)
    finally: os.chdir(cwd)
    texts.append(con.file.getvalue())
    assert not [t for t in texts if "omni-npu-port.github.io" in t], "a tool printed a link to an unpublished site"
    # links to pages (SARIF's SRCROOT base and the file URIs of results outside it are locations, not pages)
    return {m for t in texts for m in re.findall(r"file://[^\s\"'<>`]*?\.html(?:#[\w-]+)?", t)}


def test_every_link_the_tools_print_resolves_on_the_built_site(site, tmp_path):
    "Inside a project with a built site, each printed link names a page the site has, its #anchor an element id there."
    from urllib.parse import unquote, urlparse
    from omni_npu_port.core.diagnostics import REGISTRY
    from omni_npu_port.docs.codes import all_codes
    work, out = site
    links = printed_links(work, tmp_path)
    assert any("#onp" in l for l in links), f"no link to a code among the tools' output: {sorted(links)[:5]}"
    for link in sorted(links):
        url = urlparse(link)
        page = Path(unquote(url.path))
        assert page.is_file() and out.resolve() in page.resolve().parents, f"{link}: not a page of the built site {out}"
        if url.fragment:
            assert re.search(rf'id="{re.escape(url.fragment)}"', page.read_text()), f"{link}: no #{url.fragment}"
    assert "This README is what a first hour needs" not in (out / "index.html").read_text()   # a README-only cell stays off the site
    import html
    codes = html.unescape((out / "docs" / "codes.html").read_text()).replace("\u2019", "'")   # as a reader sees them (the renderer curls quotes)
    missing = [c for c in all_codes() if f'id="{c.lower()}"' not in codes]
    assert not missing, f"codes without their section on the codes page: {missing}"
    for c in list(REGISTRY.values())[:3]:   # each with its title and severity on the page
        assert c.title.split("`")[0][:30] in codes and c.severity in codes
