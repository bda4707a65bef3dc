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
