"""The docs site's whole-site checks, shared by test_docs_site (on the pages its tests read) and .ci/run (on the whole
site `omni-npu-port docs` builds in the fresh copy): every notebook a page, the sidebar links every page in order, and
the build changes no file git would commit and adds only ignored ones.

Run as a script (.ci/run does, in the fresh copy): `python tests/site_checks.py [ROOT]` runs `omni-npu-port docs
--jobs 1` in ROOT (default: this checkout), checks the site it built, prints each problem, exits 1 on any.
"""
import hashlib
import os
import posixpath
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

if __name__ == "__main__": sys.path.insert(0, str(Path(__file__).resolve().parent))   # checkout_helpers beside us
from checkout_helpers import ignored_by

from omni_npu_port.docs.site import SIDEBAR, nbdev_settings, notebooks, page_of, sidebar_sections

SIDEBAR_PAGE = "core/catalog.html"   # the page whose sidebar is read (every page has the same one)
_NEVER = {".git", ".venv", ".ci-work"}   # folders never walked (git's own, and ignored ones too large to read)


class _SidebarLinks(HTMLParser):
    "The hrefs of `#quarto-sidebar a.sidebar-link[href]` in a page, in document order (what a browser selects)."
    def __init__(self):
        super().__init__()
        self.depth, self.hrefs = 0, []   # depth: open elements inside #quarto-sidebar (0: outside it)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if self.depth: self.depth += tag not in _VOID
        elif a.get("id") == "quarto-sidebar": self.depth = 1
        if self.depth and tag == "a" and "sidebar-link" in (a.get("class") or "").split() and a.get("href") is not None:
            self.hrefs.append(a["href"])

    def handle_endtag(self, tag):
        if self.depth and tag not in _VOID: self.depth -= 1


_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def sidebar_hrefs(html: str) -> list[str]:
    "The sidebar's link targets in a built page's HTML, in order."
    p = _SidebarLinks()
    p.feed(html)
    return p.hrefs


def pages_missing(work: Path, out: Path) -> list[str]:
    "The pages (relative to the site `out`) of `work`'s notebooks that the site lacks."
    return [str(page_of(nb)) for nb in notebooks(work) if not (out / page_of(nb)).is_file()]


def sidebar_problems(work: Path, hrefs: list[str], page: str = SIDEBAR_PAGE) -> list[str]:
    "What is wrong with a sidebar (its hrefs as read on `page`): pages out of SIDEBAR's order, or not linked."
    here = posixpath.dirname(page)
    linked = [re.sub(r"\.html$", "", posixpath.normpath(posixpath.join(here, h))) for h in hrefs]
    have = {nb.with_suffix("").as_posix() for nb in notebooks(work)}
    expected = [name for _, names in SIDEBAR for name in names if name in have]
    by_layer = [name for _, names in sidebar_sections(notebooks(work)) for name in names]  # `folder/*` entries expanded
    problems = [f"the sidebar's order is {linked}, expected {want}" for want in (expected, by_layer)
                if [p for p in linked if p in want] != want]
    if unlinked := sorted(have - set(linked)):
        problems.append(f"notebooks with a page but no sidebar entry: {unlinked}")
    return problems


def committed(root: Path) -> dict[str, str]:
    "The files in `root` that its .gitignore does not ignore (what `git add -A` would take), with their digests."
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x not in _NEVER]
        files += [Path(d, n).relative_to(root).as_posix() for n in names if not Path(d, n).is_symlink()]
    ignored = ignored_by(root, files)
    files = [f for f in files if f not in ignored]
    return {f: hashlib.sha256((root / f).read_bytes()).hexdigest() for f in files}


def build_problems(root: Path, before: dict[str, str]) -> list[str]:
    "What a build did to `root` that a fresh clone must not see: files of `before` changed or gone, new unignored ones."
    after = committed(root)
    problems = [f"the docs build changed {f}" for f, d in before.items() if after.get(f, "gone") != d]
    if new := sorted(set(after) - set(before)):
        problems.append(f"the docs build left files git would see as new: {new}")
    return problems


def main(argv: list[str]) -> int:
    "Build the whole site with `omni-npu-port docs --jobs 1` in ROOT and check it; 0 if every check holds, else 1."
    root = Path(argv[0] if argv else Path(__file__).resolve().parent.parent).resolve()
    before = committed(root)
    cli = Path(sys.executable).parent / "omni-npu-port"   # the command a user runs, from this interpreter's environment
    if not cli.is_file():
        print(f"site_checks: {cli} not found: install omni-npu-port into this environment (pip install -e .)")
        return 1
    r = subprocess.run([str(cli), "docs", "--jobs", "1"], cwd=root, check=False)
    if r.returncode:
        print(f"site_checks: `omni-npu-port docs --jobs 1` failed (exit {r.returncode}) in {root}")
        return 1
    out = root / nbdev_settings(root)["doc_path"]
    problems = [f"notebooks without a page in the built site: {m}" for m in [pages_missing(root, out)] if m]
    if (out / SIDEBAR_PAGE).is_file():
        problems += sidebar_problems(root, sidebar_hrefs((out / SIDEBAR_PAGE).read_text(encoding="utf-8")))
    problems += build_problems(root, before)
    for p in problems: print(f"site_checks: {p}")
    print(f"site_checks: {len(notebooks(root))} notebooks, each a page linked in the sidebar in order; "
          "no file git would commit changed" if not problems else f"site_checks: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__": sys.exit(main(sys.argv[1:]))
