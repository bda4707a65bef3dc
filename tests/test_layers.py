"""The package's layers hold: import-linter's contracts in pyproject.toml, and no cycles between packages."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(cwd: Path):
    exe = Path(sys.executable).parent / "lint-imports"
    if not exe.exists(): pytest.fail(f"{exe} not found: install the dev extras (`pip install -e '.[dev]'`)")
    return subprocess.run([str(exe), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_layer_contracts_hold():
    r = lint_imports(ROOT)
    assert r.returncode == 0, f"a layer rule is broken (pyproject.toml [tool.importlinter]):\n{r.stdout[-4000:]}{r.stderr}"
    assert "BROKEN" not in r.stdout and "kept" in r.stdout


def test_a_library_import_of_the_cli_is_caught(tmp_path):
    "The contract is not vacuous: a core module that imports the CLI breaks it."
    import shutil
    shutil.copytree(ROOT / "omni_npu_port", tmp_path / "omni_npu_port", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "omni_npu_port" / "core" / "bad.py").write_text("from omni_npu_port.cli.main import main\n")
    r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, '.'); from importlinter.cli import lint_imports_command; "
                        "sys.argv = ['lint-imports', '--no-cache']; lint_imports_command()"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "omni_npu_port.core.bad -> omni_npu_port.cli.main" in r.stdout, r.stdout[-3000:] + r.stderr



# shipped example sources (GPU code for the tour to translate): read as text, never imported by the library
NOT_LAYERED = {"examples"}


def test_every_package_is_in_a_layer():
    "A new package outside the contract would be checked by nothing: each one is in exactly one layer."
    from omni_npu_port.core.io import load_toml
    layers = next(c for c in load_toml(ROOT / "pyproject.toml")["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    named = [m.strip() for layer in layers["layers"] for m in layer.split("|")]
    packages = {f"omni_npu_port.{p.parent.name}" for p in (ROOT / "omni_npu_port").glob("*/__init__.py")
                if p.parent.name not in NOT_LAYERED}
    assert packages and sorted(packages) == sorted(named), (sorted(packages), named)


def test_one_worker_pool_and_one_fork_check():
    "Issue 23: processes are started by `core.io.worker_pool` only, and whether forking is safe is decided in one place."
    import re
    starts = re.compile(r"ProcessPoolExecutor\(|\.Pool\(|get_all_start_methods|get_context\(")
    where = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "omni_npu_port").rglob("*.py")
                   if p.name != "_modidx.py" and starts.search(p.read_text(encoding="utf-8")))
    assert where == ["omni_npu_port/core/io.py"], where


def test_the_library_draws_no_progress_bar():
    "Issue 23: the library reports progress as events; only the CLI draws a bar (rich.progress)."
    where = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "omni_npu_port").rglob("*.py")
                   if "rich.progress" in p.read_text(encoding="utf-8"))
    assert where and all(w.startswith("omni_npu_port/cli/") for w in where), where
