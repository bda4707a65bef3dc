"""What a newcomer meets in the first hour (issue 25): check formats that say what needs a person, the kernel the
notebooks name, `translate --diff` whose summary agrees with the diff."""
import json
import os
import subprocess
import sys
from pathlib import Path

from omni_npu_port.core.diagnostics import Diagnostic, REGISTRY
from omni_npu_port.core.findings import format_findings
from omni_npu_port.docs.codes import all_codes

ROOT = Path(__file__).parent.parent
NEEDS_A_PERSON = {"error", "unsupported", "manual", "warning"}


def cli(*args, cwd=None, env=None):
    code = "import sys; from omni_npu_port.cli.main import entry; sys.exit(entry())"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def test_check_formats_say_error_or_warning_for_what_needs_a_person_and_notice_for_the_rest():
    codes = all_codes()
    found = [Diagnostic(c, "m", path="a.py", line=1) for c in codes]
    gh = format_findings(found, "github").splitlines()
    sarif = json.loads(format_findings(found, "sarif"))["runs"][0]["results"]
    for d, line, res in zip(found, gh, sarif):
        person = codes[d.code].severity in NEEDS_A_PERSON
        assert line.startswith(("::error", "::warning") if person else "::notice"), (codes[d.code].severity, line)
        assert (res["level"] in ("error", "warning")) == person, (codes[d.code].severity, res["level"])
    assert {REGISTRY[d.code].severity for d in found} & NEEDS_A_PERSON and {REGISTRY[d.code].severity for d in found} - NEEDS_A_PERSON


def test_kernel_install_writes_the_kernel_the_notebooks_name_and_says_so(tmp_path):
    from omni_npu_port.runtime.kernel import NOTEBOOK_KERNEL
    r = cli("kernel", "install", "--prefix", str(tmp_path), "--backend", "auto")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "share" / "jupyter" / "kernels" / NOTEBOOK_KERNEL / "kernel.json").is_file()
    assert "the project's notebooks name this kernel" in r.stdout
    r = cli("kernel", "install", "--prefix", str(tmp_path), "--backend", "cpu")
    assert (tmp_path / "share" / "jupyter" / "kernels" / f"{NOTEBOOK_KERNEL}-cpu").is_dir()
    assert f"the project's notebooks name {NOTEBOOK_KERNEL!r}" in r.stdout


def test_translate_diff_and_its_summary_agree(tmp_path):
    (tmp_path / "a.py").write_text("import torch\n\n\ndef f():\n    torch.cuda.synchronize()\n")
    (tmp_path / "b.py").write_text("x = 1\n")
    r = cli("translate", "a.py", "b.py", "--diff", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.count("--- a/") == 1
    assert "2 files (1 changed, 0 failed)" in r.stderr and "nothing written" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]


def test_readme_figures_come_from_the_code_and_a_stale_one_is_found_and_fixed(tmp_path):
    "A figure typed wrong in the README notebook makes --check-readme fail naming it; `docs --readme-only` puts the code's value."
    import shutil
    import pytest
    from omni_npu_port.core.catalog import CATALOG
    from omni_npu_port.docs.site import DocsError, fill_figures, readme_figures, stale_figures, write_readme
    figs = readme_figures(ROOT)
    assert figs["patterns"] == str(len(CATALOG)) and figs["families"] == str(len(CATALOG.families()))
    with pytest.raises(DocsError, match="unknown figure 'patternz'"):
        fill_figures("<!-- fig:patternz -->1<!-- /fig -->", figs)
    for name in ("pyproject.toml", "settings.ini", "README.md"): shutil.copy2(ROOT / name, tmp_path / name)
    (tmp_path / "nbs").mkdir()
    index = (ROOT / "nbs" / "index.ipynb").read_text()
    assert "<!-- fig:releases -->" in index and "<!-- fig:last-release -->" in index
    (tmp_path / "nbs" / "index.ipynb").write_text(index.replace("<!-- fig:releases -->", "<!-- fig:releases -->9").replace(
        f"<!-- fig:releases -->9{figs['releases']}", "<!-- fig:releases -->9"))
    assert stale_figures(tmp_path) == [("releases", "9", figs["releases"])]
    r = cli("docs", "--check-readme", "--root", str(tmp_path))
    assert r.returncode == 1 and f"figure releases: nbs/index.ipynb says 9, the code says {figs['releases']}" in r.stderr
    assert cli("docs", "--readme-only", "--root", str(tmp_path)).returncode == 0
    assert stale_figures(tmp_path) == [] and write_readme(tmp_path, check=True)
    assert f"<!-- fig:releases -->{figs['releases']}<!-- /fig --> releases" in (tmp_path / "nbs" / "index.ipynb").read_text()
