"""The archives set-up fetches are the ones the tests read (tests/archives.py): each entry named by the files it lists,
a download of any other release into the package cache refused during the tests, and set-up fetching the list."""
import ast
import hashlib
import json
import os
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import archives
import pytest

from omni_npu_port.sources import fetch

ROOT = Path(__file__).resolve().parents[1]


def _index(root: Path, dist: str, version: str, filename: str) -> str:
    "A file:// index serving one small sdist of `dist` `version` named `filename`, with its sha256."
    buf = BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        ti = tarfile.TarInfo(f"{dist}-{version}/PKG-INFO"); ti.size = 2
        tf.addfile(ti, BytesIO(b"x\n"))
    data = buf.getvalue()
    (root / dist / version).mkdir(parents=True)
    (root / filename).write_bytes(data)
    (root / dist / version / "json").write_text(json.dumps({"urls": [{
        "filename": filename, "url": (root / filename).as_uri(), "size": len(data), "packagetype": "sdist",
        "digests": {"sha256": hashlib.sha256(data).hexdigest()}}]}))
    return root.as_uri()


@pytest.fixture
def package_cache(tmp_path, monkeypatch):
    "A fresh folder standing for the package cache, with the download guard on (as conftest puts it on)."
    archives.guard_downloads()
    monkeypatch.setattr(fetch, "CACHE_DIR", tmp_path / "pkgs")
    return tmp_path / "pkgs"


def test_a_download_the_list_lacks_fails_naming_it(package_cache, tmp_path, capsys):
    idx = _index(tmp_path / "idx", "vllm-ascend", "9.9.9", "vllm_ascend-9.9.9.tar.gz")
    with pytest.raises(fetch.FetchError, match=r"vllm_ascend-9\.9\.9\.tar\.gz, which tests/archives.py does not list"):
        fetch.fetch_package("vllm-ascend==9.9.9", package_cache, index=idx)
    assert not list(package_cache.glob("*.tar.gz"))
    assert "download refused: vllm-ascend==9.9.9" in capsys.readouterr().err   # seen even where a caller swallows it


def test_a_listed_release_and_a_download_elsewhere_pass(package_cache, tmp_path):
    spec = next(s for s, k in archives.suite_archives() if k in (None, "sdist"))
    dist, version = spec.split("==")
    name = f"{dist.replace('-', '_')}-{version}.tar.gz"
    got = fetch.fetch_package(spec, package_cache, index=_index(tmp_path / "idx", dist, version, name))
    assert got == package_cache / name
    other = _index(tmp_path / "idx2", "vllm-ascend", "9.9.9", "vllm_ascend-9.9.9.tar.gz")   # not the package cache
    assert fetch.fetch_package("vllm-ascend==9.9.9", tmp_path / "elsewhere", index=other).is_file()


def test_unlisted_tells_a_listed_file_from_others():
    assert not archives.unlisted("vllm_ascend-0.18.0-cp311-cp311-manylinux_2_24_aarch64.whl")   # the catalog's wheel
    assert archives.unlisted("vllm_ascend-0.23.0.post1-cp311-cp311-manylinux_2_24_aarch64.whl")  # listed as an sdist
    assert archives.unlisted("vllm-0.15.0-cp38-abi3-manylinux_2_31_aarch64.whl")                # no test reads it
    assert archives.unlisted("notes.txt")


def test_each_listed_archive_is_named_by_the_files_that_read_it():
    "A named spec's version is in each file listed with it; the catalog group is what test_conformance iterates."
    for spec, _, files in archives.NAMED:
        for f in files:
            assert spec.split("==")[1] in (ROOT / f).read_text(), (spec, f)
    ops = (ROOT / archives.OPS_READER).read_text()
    assert f'"vllm_ascend", {list(archives.OPS_RELEASES)!r}'.replace("'", '"') in ops
    for f in archives.PORT_READERS:
        assert all(f'real_release_port("{v}")' in (ROOT / f).read_text() for v in archives.PORTED_RELEASES), f
    text = (ROOT / archives.CATALOG_READER).read_text()
    assert "ALL_VA = tuple(v for v in VLLM_ASCEND_VERSIONS if v != \"main\")" in text
    kind = next(n.value for n in ast.parse(text).body if isinstance(n, ast.Assign) and n.targets[0].id == "KIND")
    assert ast.literal_eval(kind) == archives.CATALOG_KIND
    listed = archives.suite_archives()
    assert len(listed) == len(set(listed)) and all(k in (None, "wheel", "sdist") for _, k in listed)


def test_setup_fetches_the_list_and_a_failed_fetch_names_the_archive(tmp_path):
    assert ".venv/bin/python tests/archives.py" in (ROOT / "scripts" / "setup.sh").read_text()
    env = {**os.environ, "OMNI_NPU_PORT_CACHE": str(tmp_path / "pkgs"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}   # this checkout's package
    r = subprocess.run([sys.executable, "tests/archives.py", "--index", (tmp_path / "no-index").as_uri()],
                       check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    n = len(archives.suite_archives())
    first = archives.suite_archives()[0][0]
    assert r.returncode == 3, r.stderr[-2000:]
    assert f"[1/{n}] {first} ... FAILED" in r.stdout and f"[{n}/{n}]" in r.stdout
    assert f"{n} of {n} archives could not be fetched" in r.stderr and "ONP9015" in r.stderr and first in r.stderr
