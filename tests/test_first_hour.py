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
    from omni_npu_port.sources.doctor import NOTEBOOK_KERNEL
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
