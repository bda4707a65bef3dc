"""A wheel of a fixture folder written by a test (the package at the archive's root), shared by the tests of the kept
derived answers and checks (test_port_derived_kept, test_port_warm, test_translate_kept_answers)."""
import zipfile
from pathlib import Path


def fixture_wheel(folder: Path, dest: Path, extra: dict | None = None) -> Path:
    "A wheel of `folder`'s .py files at `dest`, `extra` ({path: text}) added in place of a file of the same path."
    with zipfile.ZipFile(dest, "w") as z:
        for f in sorted(folder.rglob("*.py")):
            if f.relative_to(folder).as_posix() not in (extra or {}): z.write(f, f.relative_to(folder).as_posix())
        for rel, text in (extra or {}).items(): z.writestr(rel, text)
    return dest


DERIVED = Path(__file__).parent / "fixtures" / "derived"   # small vllm and vllm-ascend trees written for these tests
FIRES, QUIET = (DERIVED / "gpu_fires.py").read_text(), (DERIVED / "gpu_quiet.py").read_text()   # GPU sources: fire, not


def derived_wheels(folder: Path) -> tuple[Path, Path]:
    "The wheels of the derived fixtures' vllm 0.1.0 and vllm-ascend 0.1.0, written in `folder`: (vllm, vllm-ascend)."
    return (fixture_wheel(DERIVED / "vllm", folder / "vllm-0.1.0-py3-none-any.whl"),
            fixture_wheel(DERIVED / "ascend", folder / "vllm_ascend-0.1.0-py3-none-any.whl"))


def private_derived(monkeypatch, tmp_path: Path) -> None:
    "A private judge cache under `tmp_path` and no derived index of this process left over (undone with the test)."
    from omni_npu_port.translate import derived
    monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(derived, "_INDEXES", {})
