"""Static conformance: sources read with ast (never imported), symbols resolved, signatures rebuilt, and the
catalog's records and version ranges checked against real vllm-ascend and vllm releases from PyPI."""
import dataclasses
import functools
import hashlib
import inspect
import json
import os
import sys
import textwrap
import zipfile

import pytest

from omni_npu_port.core.catalog import CATALOG, VLLM_ASCEND_VERSIONS, VLLM_VERSIONS, parse_version
from omni_npu_port.sources.conformance import CHANGED, MISSING, NA, OK, check_record, conformance
from omni_npu_port.sources.fetch import FetchError, fetch_package
from omni_npu_port.sources.readers import SourceError, open_source, write_source_double
from omni_npu_port.sources.symbols import check_call, resolve, signature, signature_from_ast

KEY_VA = ("0.18.0", "0.23.0.post1")          # the two releases stack-facts §3 is mostly about
ALL_VA = tuple(v for v in VLLM_ASCEND_VERSIONS if v != "main")


# The issue's two key releases are read as a wheel (0.18.0) and as an sdist (0.23.0.post1, which has no wheel).
KIND = {"0.18.0": "wheel", "0.23.0.post1": "sdist"}


def va(release_source, v):
    return release_source(f"vllm-ascend=={v}", kind=KIND.get(v))


def results(tree, gpu_tree=None):
    return {r.id: r for r in conformance(tree, gpu_tree=gpu_tree)}


# --- opening sources -------------------------------------------------------------------------------------------
def test_wheel_and_sdist_open_with_versions(release_source):
    w, s = va(release_source, "0.18.0"), va(release_source, "0.23.0.post1")
    assert (w.package, w.version, w.kind) == ("vllm_ascend", "0.18.0", "wheel")
    assert (s.package, s.version, s.kind) == ("vllm_ascend", "0.23.0.post1", "sdist")
    for t in (w, s):
        assert "SEQ_LEN_WITH_MAX_PA_WORKSPACE" in t.module_source("vllm_ascend.worker.model_runner_v1")
        assert t.module_source("vllm_ascend.worker.no_such_module") is None
    assert "vllm_ascend" not in sys.modules and "torch_npu" not in sys.modules


def _sdist(path, files: dict, fmt=None, top="vllm_ascend-9.9.9"):
    "Write a gzipped sdist holding `files` ({path below the top directory: text}) in a tarfile format."
    import io
    import tarfile
    with tarfile.open(path, "w:gz", format=fmt or tarfile.PAX_FORMAT) as tf:
        for rel, text in files.items():
            data = text.encode()
            ti = tarfile.TarInfo(f"{top}/{rel}"); ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return path


SDIST_FILES = {"PKG-INFO": "Metadata-Version: 2.1\nName: vllm-ascend\nVersion: 9.9.9\n",
               "vllm_ascend/__init__.py": "", "vllm_ascend/worker/model_runner_v1.py": "X = 1\n",
               "vllm_ascend/" + "d/" * 60 + "deep.py": "# deep\n",        # a path past ustar's 255 characters
               "vllm_ascend/ü.py": "# ü\n", "csrc/kernel.cpp": "int x;\n", "tests/test_x.py": "pass\n"}


@pytest.mark.parametrize("fmt", ["PAX_FORMAT", "GNU_FORMAT"])
def test_tar_files_reads_what_tarfile_reads(tmp_path, fmt):
    import tarfile
    from omni_npu_port.sources.readers import is_source_member as _wanted, tar_files
    p = _sdist(tmp_path / "vllm_ascend-9.9.9.tar.gz", SDIST_FILES, getattr(tarfile, fmt))
    with tarfile.open(p) as tf:
        want = {m.name.partition("/")[2]: tf.extractfile(m).read() for m in tf
                if m.isfile() and _wanted(m.name.partition("/")[2])}
    got = tar_files(p)
    assert got == want and "csrc/kernel.cpp" not in got and "tests/test_x.py" not in got
    assert got["vllm_ascend/" + "d/" * 60 + "deep.py"] == b"# deep\n"


def test_tar_files_equals_tarfile_on_a_real_sdist(release_source):
    import tarfile
    from omni_npu_port.sources.readers import is_source_member as _wanted, tar_files
    p = fetch_package("vllm-ascend==0.23.0.post1", kind="sdist")
    with tarfile.open(p) as tf:
        want = {m.name.partition("/")[2]: tf.extractfile(m).read() for m in tf
                if m.isfile() and _wanted(m.name.partition("/")[2])}
    assert len(want) > 300 and tar_files(p) == want


def test_sdist_is_unpacked_once_into_the_cache(tmp_path, monkeypatch):
    from omni_npu_port.sources import readers
    cache = tmp_path / "cache"
    monkeypatch.setenv(readers.SDIST_CACHE_ENV, str(cache))
    p = _sdist(tmp_path / "vllm_ascend-9.9.9.tar.gz", SDIST_FILES)
    first = readers.SdistReader(p)
    assert first.files is not None and [z.name for z in cache.iterdir() if z.name != ".omni-npu-port-cache"] == [f"{p.name}.{p.stat().st_size}.{p.stat().st_mtime_ns}.{readers.SDIST_CACHE_FORMAT[-1]}.zip"]
    again = readers.SdistReader(p)
    assert again.files is None and again.zf is not None                  # read from the cache's zip
    assert again.names() == first.names() and all(again.read(n) == first.read(n) for n in first.names())
    assert again.read("vllm_ascend/nothing.py") is None
    again_path = tmp_path / "again" / p.name; again_path.parent.mkdir(); os.link(p, again_path)   # same name, size, mtime
    t = readers.open_source(again_path)                                   # a path not opened before: through the cache's zip
    assert (t.version, t.module_source("vllm_ascend.worker.model_runner_v1")) == ("9.9.9", "X = 1\n")
    next(cache.glob("*.zip")).write_bytes(b"not a zip")                         # a broken cache file: unpacked again
    assert readers.SdistReader(p).files is not None and readers.SdistReader(p).zf is not None


def test_sdist_cache_off_or_unwritable_still_reads(tmp_path, monkeypatch):
    from omni_npu_port.sources import readers
    p = _sdist(tmp_path / "vllm_ascend-9.9.9.tar.gz", SDIST_FILES)
    monkeypatch.setenv(readers.SDIST_CACHE_ENV, "off")
    assert readers.sdist_cache_dir() is None and readers.SdistReader(p).read("vllm_ascend/__init__.py") == b""
    blocker = tmp_path / "file"; blocker.write_text("x")                   # a cache "directory" that is a file
    monkeypatch.setenv(readers.SDIST_CACHE_ENV, str(blocker / "sub"))
    assert readers.SdistReader(p).read("vllm_ascend/worker/model_runner_v1.py") == b"X = 1\n"


def test_directory_source_from_an_unpacked_wheel(release_source, tmp_path):
    w = va(release_source, "0.18.0")
    with zipfile.ZipFile(w.origin) as zf:
        for n in zf.namelist():
            if n.endswith((".py", "METADATA")) and (n.startswith("vllm_ascend/") or ".dist-info/" in n): zf.extract(n, tmp_path)
    d = open_source(tmp_path)
    assert (d.package, d.version, d.kind) == ("vllm_ascend", "0.18.0", "directory")
    assert [r.status for r in conformance(d)] == [r.status for r in conformance(w)]
    assert open_source(tmp_path / "vllm_ascend").package == "vllm_ascend"     # the package directory itself


def test_installed_package_is_found_without_importing_it(tmp_path, monkeypatch):
    site = tmp_path / "site"
    write_source_double(site, version="0.18.0")
    (site / "vllm_ascend" / "__init__.py").write_text("raise RuntimeError('vllm_ascend was imported')\n")
    monkeypatch.syspath_prepend(str(site))
    t = open_source("vllm-ascend")
    assert (t.package, t.version, t.kind) == ("vllm_ascend", "0.18.0", "installed")
    assert check_record(t, "pa.seq-len-constant").status == OK
    assert "vllm_ascend" not in sys.modules


def test_bad_sources_say_what_is_wrong(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(SourceError, match="not a wheel"): open_source(tmp_path / "notes.txt")
    (tmp_path / "broken.whl").write_text("not a zip")
    with pytest.raises(SourceError, match="bad zip"): open_source(tmp_path / "broken.whl")
    with pytest.raises(SourceError, match="is not a vllm"): open_source(tmp_path)
    with pytest.raises(SourceError, match="no such file"): open_source(tmp_path / "x" / "vllm.whl")


# --- resolution and signatures ---------------------------------------------------------------------------------
def _write(root, files):
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))


def test_resolution_follows_reexports_bases_and_conditionals(tmp_path):
    _write(tmp_path, {
        "vllm/__init__.py": "from vllm.config import Config as PublicConfig\n",
        "vllm/config/__init__.py": "from .compilation import CUDAGraphMode, Config\nfrom . import compilation\n",
        "vllm/config/compilation.py": """
            import enum
            from vllm.base import Base
            class CUDAGraphMode(enum.Enum):
                NONE = 0
                def __bool__(self): return self != CUDAGraphMode.NONE
            class Config(Base):
                level: int = 3
            try:
                from fast import helper
            except ImportError:
                def helper(x, *, y=1): pass
            """,
        "vllm/distributed/__init__.py": "from .parallel_state import *\n",
        "vllm/distributed/parallel_state.py": "__all__ = ['graph_capture']\ndef graph_capture(device): pass\ndef hidden(): pass\n",
        "vllm/base.py": """
            import torch
            class Base:
                def describe(self, verbose=False): pass
                @staticmethod
                def make(a, b=2): pass
                @classmethod
                def build(cls, n): pass
            """,
    })
    t = open_source(tmp_path)
    r = resolve(t, "vllm.config.CUDAGraphMode.__bool__")
    assert (r.module, r.path, r.kind) == ("vllm.config.compilation", "CUDAGraphMode.__bool__", "method")
    assert r.hops == ("vllm.config.CUDAGraphMode -> vllm.config.compilation.CUDAGraphMode",)
    r = resolve(t, "vllm.PublicConfig.describe")                 # two re-export hops, then an in-source base
    assert (r.qualname, r.module, r.path) == ("vllm.PublicConfig.describe", "vllm.base", "Base.describe")
    assert r.hops[:3] == ("vllm.PublicConfig -> vllm.config.Config", "vllm.config.Config -> vllm.config.compilation.Config",
                          "vllm.config.compilation.Config -> base vllm.base.Base")
    assert resolve(t, "vllm.config.compilation.Config.level").kind == "attribute"
    assert str(signature(t, "vllm.config.compilation.helper")) == "(x, *, y=1)"      # defined in the except branch
    assert str(signature(t, "vllm.base.Base.make")) == "(a, b=2)"                    # staticmethod keeps its first
    assert str(signature(t, "vllm.base.Base.build")) == "(n)"                        # classmethod drops cls
    assert resolve(t, "vllm.config.compilation").kind == "module"
    assert str(signature(t, "vllm.distributed.graph_capture")) == "(device)"          # through `import *`
    assert not resolve(t, "vllm.distributed.hidden")                                   # not in __all__
    miss = resolve(t, "vllm.base.torch.cuda")
    assert not miss and "outside vllm" in miss.reason
    assert "no top-level 'Nope'" in resolve(t, "vllm.config.compilation.Nope").reason
    assert "has no attribute 'clear_graphs'" in resolve(t, "vllm.config.Config.clear_graphs").reason


DEFS = """
def a(x, y=1, *args, z, w=None, **kw): pass
def b(p, q, /, r=(1, 2), *, s="s"): pass
def c(): pass
def d(*, only): pass
def e(x=-1, y=[1, 2], z={"k": 0}): pass
"""


def test_signature_from_ast_matches_inspect_on_the_same_code():
    import ast
    ns = {}
    exec(DEFS, ns)
    for node in ast.parse(DEFS).body:
        assert str(signature_from_ast(node)) == str(inspect.signature(ns[node.name])), node.name


@pytest.mark.parametrize("nargs,kws", [(2, ()), (3, ()), (2, ("y",)), (1, ("x", "z")), (0, ("z",)), (3, ("z", "zz")),
                                       (2, ("z", "extra")), (5, ("z",)), (1, ("y", "y2"))])
def test_check_call_agrees_with_signature_bind(tmp_path, nargs, kws):
    _write(tmp_path, {"vllm/__init__.py": "", "vllm/m.py": "def f(a, b, y=1, *, z=2, **kw): pass\ndef g(a, b, y=1, *, z=2): pass\n"})
    t = open_source(tmp_path)
    ns = {}
    exec("def f(a, b, y=1, *, z=2, **kw): pass\ndef g(a, b, y=1, *, z=2): pass", ns)
    for fn in ("f", "g"):
        try:
            inspect.signature(ns[fn]).bind(*range(nargs), **{k: 0 for k in kws})
            expect = True
        except TypeError: expect = False
        b = check_call(t, f"vllm.m.{fn}", nargs, kws)
        assert b.ok is expect, (fn, nargs, kws, b.error)
        if b.ok and fn == "f": assert set(b.absorbed) == set(kws) - {"a", "b", "y", "z"}


def test_check_call_on_the_real_update_full_graph_params(release_source):
    sym = CATALOG["gparams.update-full"].npu_symbol
    old = check_call(va(release_source, "0.23.0.post1"), sym, 7)         # the card's 7-positional call
    assert old and old.arguments["num_dcp_pcp_tokens"] == "positional 6"
    new = check_call(va(release_source, "0.25.1rc1"), sym, 7)             # same call after the parameter left
    assert new and new.arguments["draft_attn_metadatas"] == "positional 6" and "num_dcp_pcp_tokens" not in new.arguments
    assert not check_call(va(release_source, "0.25.1rc1"), sym, 6, ["num_dcp_pcp_tokens"])


def test_check_call_forward_context_keywords(release_source):
    fc = CATALOG["fc.import"].npu_symbol
    for v in KEY_VA:
        t = va(release_source, v)
        assert check_call(t, fc, 2, ["num_tokens", "aclgraph_runtime_mode", "num_actual_tokens", "model_instance"])
        for gpu_only in ("cudagraph_runtime_mode", "ubatch_slices", "slot_mapping", "is_padding"):
            b = check_call(t, fc, 2, [gpu_only])
            assert not b and f"'{gpu_only}'" in b.error
    assert check_call(va(release_source, "0.23.0.post1"), fc, 2, ["has_sinks", "eplb_heat_collection_status"])
    assert not check_call(va(release_source, "0.18.0"), fc, 2, ["has_sinks"])
    assert check_call(va(release_source, "0.18.0"), fc, 3).arguments["virtual_engine"] == "positional 2"
    assert check_call(va(release_source, "0.23.0.post1"), fc, 3).arguments["num_tokens"] == "positional 2"


# --- the drift of stack-facts §3 on the two key releases --------------------------------------------------------
EXPECTED = {  # record id: (status on 0.18.0, status on 0.23.0.post1)
    "fc.virtual-engine": (OK, NA), "fc.signature": (NA, OK), "fc.has-sinks": (NA, OK), "fc.eplb-heat": (NA, OK),
    "pa.head-size": (NA, OK), "pa.using-paged-attention": (OK, OK), "pa.seq-len-constant": (OK, OK),
    "graph.wrapper-kwonly": (OK, OK), "graph.wrapper-construct": (OK, OK), "graph.clear-graphs": (OK, OK),
    "graph.capture": (OK, OK), "attn.state-values": (OK, OK), "sig.dummy-run": (OK, OK),
    "sig.dummy-run-profile-seq-lens": (OK, OK), "sig.dummy-run-profile-cpp": (NA, OK), "sig.model-forward": (OK, OK),
    "gparams.update-full": (OK, OK), "gparams.update-full-v025": (NA, NA), "gparams.if-needed": (OK, OK),
    "sample.ascend-sampler-async": (OK, OK), "sample.ascend-sampler-v025": (NA, OK),
    "batch.kv-cache-groups": (NA, OK), "dev.synchronize": (NA, NA),
}


def test_stack_facts_drift_on_the_key_releases(release_source):
    r18, r23 = results(va(release_source, "0.18.0")), results(va(release_source, "0.23.0.post1"))
    got = {rid: (r18[rid].status, r23[rid].status) for rid in EXPECTED}
    assert got == EXPECTED
    # what the source says outside the range, and why
    assert r23["fc.virtual-engine"].check == CHANGED and "missing parameters: virtual_engine" in r23["fc.virtual-engine"].details[0]
    for rid in ("fc.has-sinks", "fc.eplb-heat", "pa.head-size", "sig.dummy-run-profile-cpp"):
        assert r18[rid].check in (CHANGED, MISSING) and "missing parameters" in r18[rid].details[0], rid
    assert r23["gparams.update-full-v025"].check == CHANGED      # num_dcp_pcp_tokens still there in 0.23
    assert r18["dev.synchronize"].check is None                   # torch symbols are out of scope here


def test_constants_and_enums_checked_by_value(release_source, tmp_path):
    for v in KEY_VA:
        t = va(release_source, v)
        assert check_record(t, "pa.seq-len-constant").details == []
        assert check_record(t, "attn.state-values").details == []
    root = write_source_double(tmp_path)
    p = root / "vllm_ascend/worker/model_runner_v1.py"
    p.write_text(p.read_text().replace("6144", "4096"))
    p = root / "vllm_ascend/attention/attention_v1.py"
    p.write_text(p.read_text().replace("DecodeOnly = 2", "DecodeOnly = 7"))
    t = open_source(root)
    assert check_record(t, "pa.seq-len-constant").details == ["value 4096, expected 6144"]
    assert check_record(t, "attn.state-values").details == ["member DecodeOnly: expected 2, found 7"]


def test_positional_hazards_gpu_order_against_npu(release_source):
    t18 = va(release_source, "0.18.0")
    r = check_record(t18, "sig.dummy-run")
    assert r.status == OK and "positional 1: cudagraph_runtime_mode would bind to with_prefill" in r.hazards
    gpu = release_source("vllm==0.18.0")
    real = check_record(t18, "sig.dummy-run", gpu_tree=gpu)        # the real GPU order instead of the catalog's
    gpu_params = [n for n in signature(gpu, CATALOG["sig.dummy-run-gpu"].gpu_symbol).parameters]
    assert real.hazards and real.hazards[0].startswith(f"positional 1: {gpu_params[1]} would bind to with_prefill")
    assert check_record(t18, "sig.model-forward").hazards == []    # no GPU order known from the catalog


def test_dropped_and_renamed_keywords(release_source):
    for v in KEY_VA:
        t = va(release_source, v)
        assert check_record(t, "fc.drop-gpu-kwargs").status == OK
        assert check_record(t, "fc.runtime-mode-kwarg").status == OK
    gpu = release_source("vllm==0.18.0")
    r = check_record(gpu, "fc.runtime-mode-kwarg")                # GPU side: the renamed-from keyword exists
    assert r.status == OK and r.symbol == CATALOG["fc.runtime-mode-kwarg"].gpu_symbol


# --- catalog ranges agree with the sources ---------------------------------------------------------------------
def _claims(rec):
    from omni_npu_port.sources.conformance import record_methods
    return rec.npu_symbol, set(rec.params), set(record_methods(rec))


def _implied(rec, tree, catalog) -> bool:
    """Whether another record holding for the tree says everything `rec` says (same symbol, its params and methods
    among the other's), so `rec` agreeing with the source outside its own range is no sign of a wrong range."""
    sym, params, methods = _claims(rec)
    if sym is None or not (params or methods) or rec.drop or rec.rename or rec.add: return False
    for other in catalog:
        if other is rec or other.npu_symbol != sym: continue
        if check_record(tree, other).holds and params <= set(other.params) and methods <= _claims(other)[2]: return True
    return False


def _span(rec, pkg):
    if pkg == "vllm": return f"[{rec.vllm_since}, {rec.vllm_until})"
    return " ∪ ".join(f"[{lo}, {hi})" for lo, hi in rec.ranges)


def disagreements(trees: dict, catalog=CATALOG) -> list[str]:
    """Every release, every record: a record that holds must be ok in the source, and a record that does not hold
    must not be ok there (unless a record that holds there says as much), so a range that is looser, tighter or
    missing a gap shows at the first release it gets wrong."""
    out = []
    by_version = sorted(trees, key=parse_version)
    pkg = next(iter(trees.values())).package
    for rec in catalog:
        res = {v: check_record(trees[v], rec) for v in by_version}
        if all(r.check is None for r in res.values()): continue
        for v, r in res.items():
            if r.holds and r.check != OK: out.append(f"{rec.id} holds for {v} but the source says {r.check}: {r.details}")
            elif not r.holds and r.check == OK and not _implied(rec, trees[v], catalog):
                out.append(f"{rec.id} {_span(rec, pkg)} does not hold for {v}, yet the source there agrees with it")
    return out


def test_catalog_ranges_agree_with_the_key_releases(release_source):
    assert disagreements({v: va(release_source, v) for v in KEY_VA}) == []


def test_agreement_check_catches_a_wrong_range(release_source):
    trees = {v: va(release_source, v) for v in KEY_VA}
    wrong = [dataclasses.replace(CATALOG["fc.has-sinks"], since="0.18.0"),          # too early
             dataclasses.replace(CATALOG["fc.virtual-engine"], until="0.18.0"),      # too early an end
             dataclasses.replace(CATALOG["pa.head-size"], since="0.23.0.post1", id="pa.late")]
    found = disagreements(trees, wrong)
    assert any(f.startswith("fc.has-sinks holds for 0.18.0") for f in found)
    assert "fc.virtual-engine [0.16.0rc1, 0.18.0) does not hold for 0.18.0, yet the source there agrees with it" in found
    assert not any("pa.late" in f for f in found)   # 0.18.0 is before it and is not ok: no disagreement
    late = [dataclasses.replace(CATALOG["pa.head-size"], since="0.25.1rc1")]  # 0.23.0.post1 is ok but outside
    assert disagreements(trees, late) == ["pa.head-size [0.25.1rc1, None) does not hold for 0.23.0.post1, yet the "
                                         "source there agrees with it"]
    hole = [dataclasses.replace(CATALOG["pa.head-size"], gaps=(("0.23.0", "0.25.1rc1"),))]   # a wrong gap
    assert disagreements(trees, hole) == ["pa.head-size [0.23.0rc1, 0.23.0) ∪ [0.25.1rc1, None) does not hold for "
                                         "0.23.0.post1, yet the source there agrees with it"]


def test_gapped_ranges_against_the_releases_they_skip(release_source):
    """graph.clear-graphs: ACLGraphWrapper had clear_graphs / clear_all_graphs in 0.21.0rc1 and 0.22.1rc1 only;
    fc.has-sinks: input_ids left set_ascend_forward_context in 0.27.1rc1 (fc.input-ids-removed from there)."""
    trees = {v: va(release_source, v) for v in ("0.20.2rc1", "0.21.0rc1", "0.22.1rc1", "0.23.0rc1", "0.26.0rc1", "0.27.1rc1")}
    assert disagreements(trees) == []
    clear = {v: check_record(t, "graph.clear-graphs") for v, t in trees.items()}
    assert [v for v, r in clear.items() if not r.holds] == ["0.21.0rc1", "0.22.1rc1"]
    assert all("now has clear_graphs" in clear[v].details[0] for v in ("0.21.0rc1", "0.22.1rc1"))
    contiguous = dataclasses.replace(CATALOG["graph.clear-graphs"], gaps=())       # the old, gapless range
    assert [f.split(" holds for ")[1].split()[0] for f in disagreements(trees, [contiguous])] == ["0.21.0rc1", "0.22.1rc1"]
    old_sinks = dataclasses.replace(CATALOG["fc.has-sinks"], until=None)           # input_ids claimed for ever
    assert any(f.startswith("fc.has-sinks holds for 0.27.1rc1") for f in disagreements(trees, [old_sinks]))


def test_the_first_release_is_the_oldest_where_the_card_holds(release_source):
    """Every card record that holds from the start is ok in the catalog's first release; the release just before
    it (0.13.0rc1) lacks at least one of them, so the catalog does not start later or earlier than the card."""
    first = VLLM_ASCEND_VERSIONS[0]
    card = [r for r in CATALOG if r.source != "beyond-card" and r.since is None]
    at_first = {r.id: check_record(va(release_source, first), r) for r in card}
    assert all(c.check in (OK, None) for c in at_first.values()), {k: c.details for k, c in at_first.items() if c.check not in (OK, None)}
    before = {r.id: check_record(va(release_source, "0.13.0rc1"), r) for r in card}
    assert [k for k, c in before.items() if c.check not in (OK, None)] == ["pa.seq-len-constant"]


def test_forward_context_params_on_the_0_13_to_0_15_releases(release_source):
    """The releases 0.13.0–0.15.0rc1 accept aclgraph_runtime_mode=; the catalog's parameter list there says so
    (it was empty, and translate reported "it takes:" with nothing after it)."""
    from omni_npu_port.sources.symbols import check_call
    fc = CATALOG["fc.import"].npu_symbol
    for v in ("0.13.0", "0.14.0rc1", "0.15.0rc1"):
        t = va(release_source, v)
        params = CATALOG.params_for(fc, vllm_ascend=v)
        real = [n for n in signature(t, fc).parameters]
        assert list(params) == real, v
        assert "aclgraph_runtime_mode" in params and check_call(t, fc, 2, ["aclgraph_runtime_mode"])


@pytest.mark.slow
def test_catalog_ranges_agree_with_every_vllm_ascend_release(release_source):
    assert disagreements({v: va(release_source, v) for v in ALL_VA}) == []


@pytest.mark.slow
def test_catalog_ranges_agree_with_vllm_releases(release_source):
    trees = {v: release_source(f"vllm=={v}") for v in ("0.17.0", "0.18.0", "0.34.0")}
    assert disagreements(trees) == []
    r = results(trees["0.34.0"])
    assert r["vllm.v1-runner-removed"].status == OK and r["sig.dummy-run-gpu"].status == NA
    assert results(trees["0.17.0"])["graph.clear-graphs"].check == MISSING


# --- fetching --------------------------------------------------------------------------------------------------
def _fake_index(tmp_path, payload: bytes, sha: str):
    idx = tmp_path / "index"
    (idx / "vllm-ascend" / "9.9.9").mkdir(parents=True)
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "vllm_ascend-9.9.9.tar.gz").write_bytes(payload)
    doc = {"urls": [{"filename": "vllm_ascend-9.9.9.tar.gz", "url": "../../../files/vllm_ascend-9.9.9.tar.gz",
                     "size": len(payload), "digests": {"sha256": sha}, "packagetype": "sdist"}]}
    (idx / "vllm-ascend" / "9.9.9" / "json").write_text(json.dumps(doc))
    return "file://" + str(idx)


def test_fetch_verifies_sha256_and_caches(tmp_path):
    payload = b"not really a tarball"
    cache = tmp_path / "cache"
    with pytest.raises(FetchError, match="sha256"):
        fetch_package("vllm-ascend==9.9.9", cache, index=_fake_index(tmp_path / "bad", payload, "0" * 64))
    assert [f.name for f in cache.iterdir()] == [".omni-npu-port-cache"]   # the cache's marker (issue 22), nothing else
    good = _fake_index(tmp_path / "good", payload, hashlib.sha256(payload).hexdigest())
    p = fetch_package("vllm-ascend==9.9.9", cache, index=good)
    assert p.read_bytes() == payload and p.parent == cache
    assert fetch_package("vllm-ascend==9.9.9", cache, index="file:///nowhere") == p      # served from the cache
    with pytest.raises(FetchError, match="give NAME==VERSION"): fetch_package("vllm-ascend", cache)
    with pytest.raises(FetchError, match="no files"): fetch_package("vllm-ascend==9.9.8", cache, index=good)
    # a kind the release does not have: the sdist in the cache is not taken for a wheel, and the index has none
    with pytest.raises(FetchError, match="has no wheel"): fetch_package("vllm-ascend==9.9.9", cache, index=good, kind="wheel")
    assert fetch_package("vllm-ascend==9.9.9", cache, index="file:///nowhere", kind="sdist") == p
    with pytest.raises(FetchError, match="kind="): fetch_package("vllm-ascend==9.9.9", cache, kind="egg")


_METADATA_FILES = ("requirements.txt", "Dockerfile", "docs/source/community/versioning_policy.md")


@functools.lru_cache(maxsize=None)
def _sdist_texts(path) -> dict:
    """The sdist's top-level requirements.txt and Dockerfile and its versioning policy, read in one streaming pass
    that stops once all three are found (an sdist is a gzip stream: no member can be read without the ones before)."""
    import tarfile
    out = {}
    with tarfile.open(path, "r|gz") as t:
        for m in t:
            rel = m.name.partition("/")[2]
            if rel in _METADATA_FILES and m.isfile():
                out[rel] = t.extractfile(m).read().decode()
                if len(out) == len(_METADATA_FILES): break
    return out


def _torch_npu_pin(path):
    """The torch-npu pin of a vllm-ascend wheel (METADATA) or sdist (requirements.txt), read from the archive."""
    import re, zipfile
    if str(path).endswith(".whl"):
        with zipfile.ZipFile(path) as z:
            text = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    else:
        text = _sdist_texts(path)["requirements.txt"]
    found = re.search(r"^(?:Requires-Dist:\s*)?torch[-_]npu\s*==\s*([\w.]+)", text, re.M | re.I)
    return found and found.group(1)


@pytest.mark.parametrize("version", ALL_VA)
def test_torch_npu_pins_agree_with_the_releases(version):
    from omni_npu_port.core.catalog import PAIRING, TORCH_NPU_PINS
    assert TORCH_NPU_PINS[version] == _torch_npu_pin(fetch_package(f"vllm-ascend=={version}", kind=KIND.get(version)))
    if version in PAIRING: assert PAIRING[version][1] == TORCH_NPU_PINS[version]


def _paired_vllm(path, version):
    """The vllm a vllm-ascend sdist pairs with: its own row of docs/source/community/versioning_policy.md's
    compatibility table, else its Dockerfile's VLLM_TAG (conf.py's pip_vllm_version is stale or a placeholder)."""
    import re
    texts = _sdist_texts(path)
    row = re.search(rf"^\|\s*v{re.escape(version)}\s*\|\s*v([\w.]+)\s*\|",
                    texts.get("docs/source/community/versioning_policy.md", ""), re.M)
    if row: return row.group(1)
    tag = re.search(r"VLLM_TAG=v([\w.]+)", texts.get("Dockerfile", ""))
    return tag and tag.group(1)


@pytest.mark.parametrize("version", ALL_VA)
def test_vllm_pairings_agree_with_the_releases(version):
    from omni_npu_port.core.catalog import PAIRING
    assert PAIRING[version][0] == _paired_vllm(fetch_package(f"vllm-ascend=={version}", kind="sdist"), version)


# --- limits and error kinds ------------------------------------------------------------------------------------
def test_tar_files_refuses_members_and_totals_past_the_limits(tmp_path, monkeypatch):
    from omni_npu_port.sources import readers
    p = _sdist(tmp_path / "vllm_ascend-9.9.9.tar.gz", {**SDIST_FILES, "vllm_ascend/big.py": "x = 1\n" * 100})
    monkeypatch.setattr(readers, "MAX_MEMBER_BYTES", 500)
    with pytest.raises(SourceError, match="big.py is 600 bytes"): readers.tar_files(p)
    monkeypatch.setattr(readers, "MAX_MEMBER_BYTES", 1 << 20)
    monkeypatch.setattr(readers, "MAX_SOURCE_BYTES", 100)
    with pytest.raises(SourceError, match="more than 100 bytes"): readers.tar_files(p)


def test_a_corrupt_sdist_is_a_source_error(tmp_path, monkeypatch):
    from omni_npu_port.sources import readers
    monkeypatch.setenv(readers.SDIST_CACHE_ENV, "off")
    p = tmp_path / "vllm_ascend-9.9.9.tar.gz"
    p.write_bytes(_sdist(tmp_path / "ok.tar.gz", SDIST_FILES).read_bytes()[:300])     # cut short
    with pytest.raises(SourceError, match="not a readable sdist"): open_source(p)


def test_source_and_fetch_errors_are_input_errors_with_their_old_bases():
    from omni_npu_port.core.errors import InputError, exit_code_of
    for err in (SourceError("x"), FetchError("x")):
        assert isinstance(err, InputError) and exit_code_of(err) == 3
    assert isinstance(SourceError("x"), ValueError) and isinstance(FetchError("x"), RuntimeError)
