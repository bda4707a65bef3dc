"What a clone of this checkout holds, wherever the tests run: a git checkout, or a copy without .git (.ci/run's)."
import subprocess
import tempfile
from pathlib import Path

_NOT_COMMITTED = {".git", ".venv", ".ci-work", "_docs", "_proc", "__pycache__", ".pytest_cache", "build", "dist",
                  ".ipynb_checkpoints", "artifacts"}


def git(*args, cwd: Path, input: str | None = None) -> str:
    "Run git in `cwd` (no user config needed); its stdout."
    r = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, capture_output=True,
                       text=True, timeout=120, input=input)
    assert r.returncode == 0, f"git {' '.join(args)} failed: {r.stderr}"
    return r.stdout


def _is_top(root: Path) -> bool:
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True)
    return top.returncode == 0 and Path(top.stdout.strip()).resolve() == root.resolve()


def tracked_files(root: Path) -> list[str]:
    ("The files a clone holds: git's list where `root` is a repository's top, else (a copy such as .ci/run's "
     ".ci-work/, which has no .git) every file outside the build, cache and environment folders.")
    if _is_top(root): return [r for r in git("ls-files", "-z", cwd=root).split("\0") if r]
    return [p.relative_to(root).as_posix() for p in root.rglob("*")
            if (p.is_file() or p.is_symlink()) and not _NOT_COMMITTED & set(p.relative_to(root).parts)
            and not any(x.endswith(".egg-info") for x in p.relative_to(root).parts)]


def ignored_by(root: Path, paths: list[str]) -> set[str]:
    "Which of `paths` the checkout's own .gitignore ignores, read in a repository of its own (never a parent's)."
    with tempfile.TemporaryDirectory() as d:
        git("init", "-q", cwd=Path(d))
        (Path(d) / ".gitignore").write_bytes((root / ".gitignore").read_bytes())
        r = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=d, input="\n".join(paths),
                           capture_output=True, text=True, timeout=120)
        return set(r.stdout.split("\n")) - {""}
