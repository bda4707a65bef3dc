"""The release archives the test suite reads from the package cache, and nothing else: `scripts/setup.sh` fetches
exactly these (`python tests/archives.py`), one line each. From the code where a test iterates a constant (the
catalog's vllm-ascend releases), else the specs the tests name, each with the files that read it: a download of any
other release into the package cache during the tests fails (`guard_downloads`, from conftest), and
test_archives checks that each entry is still named by the files it lists, so the list cannot drift from the tests.
`benchmarks/suite_archives.py` runs the reading files on an empty cache and compares what they open with it.
The tour (set-up's run of the main job) reads no archive."""
from __future__ import annotations

import sys
from pathlib import Path

# test_conformance reads every vllm-ascend release the catalog knows (its ALL_VA, the kinds of its KIND: 0.18.0 as a
# wheel, 0.23.0.post1 as an sdist, the others the smaller file) and checks each one's pairing in its sdist
CATALOG_READER = "tests/test_conformance.py"
CATALOG_KIND = {"0.18.0": "wheel", "0.23.0.post1": "sdist"}

# test_ops checks the catalog's ops records on the torch-npu wheel each of these vllm-ascend releases pins (check_ops)
OPS_READER, OPS_RELEASES = "tests/test_ops.py", ("0.13.0", "0.18.0", "0.30.0rc2")

# test_release and test_port_wraps_inline port these whole (conftest's real_release_port): what the port of a release
# the table pairs reads is `port.release_inputs.release_archives` (the release, its vllm and vllm-ascend, the history)
PORT_READERS, PORTED_RELEASES = ("tests/test_release.py", "tests/test_port_wraps_inline.py"), ("0.30.0",)

# spec, kind (None: the smaller file, as `fetch_package` takes), the test files that read it
NAMED = (
    ("vllm-ascend==0.18.0", "sdist", ("tests/test_conformance.py",)),
    ("vllm-ascend==0.13.0rc1", None, ("tests/test_conformance.py", "tests/test_workers_and_drift.py")),
    ("vllm-ascend==0.12.0rc1", "sdist", ("tests/test_target.py",)),
    ("vllm==0.16.0", None, ("tests/test_port.py",)),
    ("vllm==0.17.0", None, ("tests/test_conformance.py",)),
    ("vllm==0.18.0", None, ("tests/test_conformance.py", "tests/test_doctor.py", "tests/test_port.py")),
    ("vllm==0.30.0", None, ("tests/test_workers_and_drift.py",)),
    ("vllm==0.34.0", None, ("tests/test_bad_input.py", "tests/test_conformance.py", "tests/test_workers_and_drift.py")),
    ("vllm-omni==0.16.0", None, ("tests/test_doctor.py", "tests/test_port.py")),
    ("vllm-omni==0.18.0", None, ("tests/test_port.py",)),
    # unpacked as a checkout when it is in the cache; its evidence must find the vllm it was written for in the cache
    ("vllm-omni==0.22.0", "wheel", ("tests/test_target_evidence.py",)),
    ("vllm==0.22.0", None, ("tests/test_target_evidence.py",)),
    ("torch-npu==2.9.0", "wheel", ("tests/test_ops.py",)),
    ("torch-npu==2.10.0.post4", "wheel", ("tests/test_ops.py",)),
)


def suite_archives() -> list[tuple[str, str | None]]:
    "(spec, kind) of every archive the tests read (kind None: the smaller file), the catalog's releases first."
    from omni_npu_port.core.catalog import TORCH_NPU_PINS, VLLM_ASCEND_VERSIONS
    out = [(f"vllm-ascend=={v}", CATALOG_KIND.get(v)) for v in VLLM_ASCEND_VERSIONS if v != "main"]
    out += [p for p in dict.fromkeys((f"torch-npu=={TORCH_NPU_PINS[v]}", "wheel") for v in OPS_RELEASES)]
    from omni_npu_port.port.release_inputs import release_archives
    out += [a for v in PORTED_RELEASES for a in release_archives(v) if a not in out]
    return out + [(spec, kind) for spec, kind, _ in NAMED if (spec, kind) not in out]


def unlisted(filename: str, listed=None) -> bool:
    "Whether a release file (a wheel's or an sdist's name) is none of the archives `listed` (`suite_archives()`)."
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    from omni_npu_port.sources.fetch import release_of
    r = release_of(filename)
    if r is None: return True
    for spec, kind in (suite_archives() if listed is None else listed):
        name, _, version = spec.partition("==")
        if (canonicalize_name(name), Version(version)) == r[:2] and kind in (None, r[2]): return False
    return True


def guard_downloads() -> None:
    ("From here on in this process, a download into the package cache (`fetch.CACHE_DIR`) of a release this list does "
     "not name is a FetchError that names it and this file; downloads into any other folder are not checked.")
    from omni_npu_port.sources import fetch
    real = fetch._download
    if getattr(real, "guarded", False): return

    def _download(spec, f, dest, progress=None):
        cache = Path(fetch.CACHE_DIR).expanduser().resolve() if fetch.CACHE_DIR else None
        if cache is not None and Path(dest).parent.resolve() == cache and unlisted(f["filename"]):
            said = (f"{spec}: a test reads {f['filename']}, which tests/archives.py does not list: add it there "
                    "(set-up fetches that list, and only that)")
            print(f"download refused: {said}", file=sys.stderr)   # shown with the test's failure where code swallows it
            raise fetch.FetchError(said)
        return real(spec, f, dest, progress)
    _download.guarded = True
    fetch._download = _download


if __name__ == "__main__":   # scripts/setup.sh: fetch the list into the package cache, one line each
    import argparse

    from omni_npu_port.core.errors import InputError
    from omni_npu_port.sources.fetch import CACHE_DIR, PYPI, fetch_archives
    ap = argparse.ArgumentParser(description="Fetch the release archives the tests read into the package cache.")
    ap.add_argument("--index", default=PYPI, help=f"the package index's JSON API (default {PYPI})")
    args = ap.parse_args()
    print(f"fetching the archives the tests read into {CACHE_DIR}", flush=True)
    try: fetch_archives(suite_archives(), index=args.index)
    except InputError as e:
        print(f"setup: error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
