"""The library's style (issue 34 part 6): ruff's default rules and lines <= 120 characters on omni_npu_port/, under the
project's [tool.ruff] settings, and the script that gets it there by fixing the notebooks (scripts/restyle.py).

What is not clean yet is `PENDING`: rule -> the most findings it may have. It only shrinks: after the parallel edits
merge, `python scripts/restyle.py` fixes what ruff can in the notebooks, the rest is split by hand, and the failure
message prints the dict to paste. A rule not in it must have no finding at all.
"""
import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "omni_npu_port"

# rule -> findings still allowed (2026-12-07, issue 34 part 6); restyle.py clears the fixable ones, people the rest
PENDING = {}


def ruff_exe() -> str | None:
    "The ruff executable of the `ruff` package, else `ruff` on PATH; None when neither is installed."
    try:
        from ruff.__main__ import find_ruff_bin
        return os.fsdecode(find_ruff_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("ruff")


RUFF = ruff_exe()
needs_ruff = pytest.mark.skipif(RUFF is None, reason="ruff is not installed (it is in the dev extras: "
                                                     "pip install -e '.[dev]')")


def nbdev_all_line(path: Path, row: int, cache: dict) -> bool:
    ("Whether line `row` of `path` is the first line of the `__all__` nbdev writes (it wraps the names at 120 and then "
     "prefixes `__all__ = `, so that line can pass 120 and no notebook holds it).")
    lines = cache.setdefault(path, path.read_text(encoding="utf-8").splitlines())
    return row >= 2 and lines[row - 2] == "# %% auto #0" and lines[row - 1].startswith("__all__ = [")


def ruff_findings(paths: list[Path], cwd: Path = ROOT, config: Path | None = None) -> list[dict]:
    "ruff's findings (its JSON records) on `paths` under the project's settings, nbdev's `__all__` lines left out."
    cmd = [RUFF, "check", "--no-cache", "--output-format", "json", "--exit-zero"]
    if config is not None: cmd += ["--config", str(config)]
    p = subprocess.run(cmd + [str(p) for p in paths], cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr
    cache: dict = {}
    return [f for f in json.loads(p.stdout or "[]")
            if not (f["code"] == "E501" and nbdev_all_line(Path(f["filename"]), f["location"]["row"], cache))]


def over_pending(found: list[dict], pending: dict[str, int]) -> list[str]:
    "`file:row: CODE message` for each finding of a rule with more findings than `pending` allows."
    counts = Counter(f["code"] for f in found)
    over = {code for code, n in counts.items() if n > pending.get(code, 0)}
    return [f"{Path(f['filename']).relative_to(ROOT) if Path(f['filename']).is_relative_to(ROOT) else f['filename']}:"
            f"{f['location']['row']}: {f['code']} {f['message']}" for f in found if f["code"] in over]


@needs_ruff
def test_the_library_passes_ruff():
    "No rule has more findings than PENDING allows (none for a rule not named there)."
    found = ruff_findings([LIB])
    bad = over_pending(found, PENDING)
    now = dict(Counter(f["code"] for f in found).most_common())
    assert not bad, (f"ruff finds {len(bad)} findings over what PENDING allows (fix them in the notebooks: "
                     f"scripts/restyle.py, then by hand):\n" + "\n".join(bad[:200])
                     + f"\nPENDING, as it stands now: {now}")


@needs_ruff
def test_pending_names_only_rules_ruff_checks():
    "A PENDING rule is one the project's settings select (a typo or a rule turned off would allow nothing real)."
    p = subprocess.run([RUFF, "check", "--show-settings", str(LIB / "__init__.py")], cwd=ROOT, capture_output=True,
                       text=True, timeout=120, check=True)
    enabled = p.stdout.split("linter.rules.enabled", 1)[1].split("linter.rules.should_fix", 1)[0]
    assert all(f"({code})" in enabled for code in PENDING), [c for c in PENDING if f"({c})" not in enabled]


@needs_ruff
def test_the_check_can_fail(tmp_path):
    "The project's settings catch a line over 120 and a blind except, and pass the same code split and specific."
    bad, good = tmp_path / "bad.py", tmp_path / "good.py"
    bad.write_text("def f(x):\n    try:\n        return int(x)\n    except Exception:\n        return None\n\n\n"
                   f"MESSAGE = 'a port of {'x' * 110}'\n")
    good.write_text("def f(x):\n    try:\n        return int(x)\n    except ValueError:\n        return None\n\n\n"
                    f"MESSAGE = ('a port of '\n           '{'x' * 110}')\n")
    found = ruff_findings([bad, good], cwd=tmp_path, config=ROOT / "pyproject.toml")
    assert sorted((Path(f["filename"]).name, f["code"]) for f in found) == [("bad.py", "BLE001"), ("bad.py", "E501")]
    assert over_pending(found, {"E501": 1}) and not over_pending(found, {"E501": 1, "BLE001": 1})


def test_nbdevs_all_line_is_the_only_long_line_let_through(tmp_path):
    "Only the first `__all__` line right under nbdev's `# %% auto #0` marker is nbdev's; any other long line counts."
    mod = tmp_path / "m.py"
    mod.write_text("# %% auto #0\n__all__ = ['a']\n__all__ = ['b']\n# %% ../nbs/m.ipynb #1\nx = 1\n")
    assert [nbdev_all_line(mod, r, {}) for r in (1, 2, 3, 5)] == [False, True, False, False]
