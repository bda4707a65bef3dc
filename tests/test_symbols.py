"""The symbol index across sources (omni_npu_port.sources.symbols): names resolved the way Python resolves them —
imports, re-exports, `import *` with `__all__`, `import a.b as c`, package `__init__` re-exports, class bases and
the MRO across a vllm sdist, a vllm-ascend wheel and a vLLM-Omni directory or installed package. The fixtures
under tests/fixtures/sources/ are small packages written for these tests; where they can be imported, Python's
own answer is the expected one."""
import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from omni_npu_port.sources.readers import SourceError, open_source
from omni_npu_port.sources.symbols import Mro, SymbolIndex, Unresolved, as_index, class_attr, mro, resolve

FIX = Path(__file__).parent / "fixtures" / "sources"
ROOTS = {"vllm": FIX / "vllm_src", "vllm_ascend": FIX / "ascend_src", "vllm_omni": FIX / "omni_src"}
NPU = "vllm_omni.worker.npu"


def _files(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.py"))}


def make_wheel(root: Path, dest: Path, dist: str, version: str) -> Path:
    "A wheel of the package under `root` (its .py files and a METADATA)."
    path = dest / f"{dist.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for rel, data in _files(root).items(): z.writestr(rel, data)
        z.writestr(f"{dist.replace('-', '_')}-{version}.dist-info/METADATA",
                   f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    return path


def make_sdist(root: Path, dest: Path, dist: str, version: str) -> Path:
    "An sdist (.tar.gz) of the package under `root`, with PKG-INFO."
    top = f"{dist.replace('-', '_')}-{version}"
    path = dest / f"{top}.tar.gz"
    files = {**_files(root), "PKG-INFO": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n".encode()}
    with tarfile.open(path, "w:gz") as tf:
        for rel, data in files.items():
            ti = tarfile.TarInfo(f"{top}/{rel}"); ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return path


@pytest.fixture
def index(tmp_path, monkeypatch):
    "vllm as an sdist, vllm-ascend as a wheel, vLLM-Omni as a directory."
    monkeypatch.setenv("OMNI_NPU_PORT_SDIST_CACHE", "off")
    return SymbolIndex.open(make_sdist(ROOTS["vllm"], tmp_path, "vllm", "0.30.0"),
                            make_wheel(ROOTS["vllm_ascend"], tmp_path, "vllm-ascend", "0.30.0rc1"),
                            ROOTS["vllm_omni"])


def python_says(code: str) -> object:
    "Run `code` (which prints JSON) in a fresh Python that imports the fixture packages; its answer."
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(r) for r in ROOTS.values())}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout)


def test_the_index_reads_a_wheel_an_sdist_and_a_directory(index):
    kinds = {p: t.kind for p, t in index.trees.items()}
    assert kinds == {"vllm": "sdist", "vllm_ascend": "wheel", "vllm_omni": "directory"}
    assert len(index.searched) == 3 and all(p in s for p, s in zip(index.trees, index.searched))


NAMES = [f"{NPU}.npu_model_runner.set_forward_context",          # re-exported by vllm's runner module
         f"{NPU}.OmniNPUModelRunner",                              # a package __init__ re-export (`as` the same name)
         f"{NPU}.npu_ar_model_runner.OmniNPUModelRunner",          # imported from that package
         "vllm_ascend.worker.NPUModelRunner",                      # `from .model_runner_v1 import *` with __all__
         "vllm_ascend.worker.model_runner_v1.AscendRunner",        # a plain alias
         "vllm_ascend.worker.model_runner_v1.gmr.GPUModelRunner",  # `import a.b as c`
         f"{NPU}.npu_model_runner.NPUModelRunner._dummy_run",      # a method of a class from another source
         f"{NPU}.npu_ar_model_runner.NPUARModelRunner.load_lora_model",   # inherited across three sources
         f"{NPU}.npu_ar_model_runner.NPUARModelRunner.profile_run",       # C3: KVConnectorMixin before RunnerBase
         f"{NPU}.npu_ar_model_runner.NPUARModelRunner.load_model"]


def test_resolve_agrees_with_python_on_every_name(index):
    "Where each name is defined, statically, is where Python finds it when it imports the fixtures."
    want = python_says(f"""
        import importlib, json
        out = []
        for name in {NAMES!r}:
            parts = name.split(".")
            for i in range(len(parts), 0, -1):
                try: obj = importlib.import_module(".".join(parts[:i])); break
                except ImportError: continue
            for a in parts[i:]: obj = getattr(obj, a)
            out.append(obj.__module__ + "." + obj.__qualname__)
        print(json.dumps(out))""")
    got = [index.resolve(n) for n in NAMES]
    assert all(got), [str(g) for g in got if not g]
    assert [g.dotted for g in got] == want


def test_mro_agrees_with_python_and_names_each_source(index):
    for cls in (f"{NPU}.npu_ar_model_runner.NPUARModelRunner", "vllm.v1.worker.gpu_model_runner.GPUModelRunner"):
        want = python_says(f"""
            import importlib, json
            mod, _, name = {cls!r}.rpartition(".")
            c = getattr(importlib.import_module(mod), name)
            print(json.dumps([k.__module__ + "." + k.__qualname__ for k in c.__mro__ if k is not object]))""")
        m = index.mro(cls)
        assert isinstance(m, Mro) and m.complete and m.names() == want
    m = index.mro(f"{NPU}.npu_ar_model_runner.NPUARModelRunner")
    kinds = [index.trees[c.module.split(".")[0]].kind for c in m]
    assert kinds == ["directory", "directory", "directory", "wheel", "sdist", "sdist", "sdist", "sdist"]
    assert all(c.source and c.source.startswith(c.module.split(".")[0] + " ") for c in m)


def test_attribute_lookup_follows_the_mro_not_depth_first(index):
    "`profile_run` is defined by RunnerBase and by KVConnectorMixin; Python (C3) takes the mixin's."
    a = index.attr(f"{NPU}.npu_ar_model_runner.NPUARModelRunner", "profile_run")
    assert (a.module, a.path, a.kind) == ("vllm.v1.worker.mixins", "KVConnectorMixin.profile_run", "method")
    assert a.source.startswith("vllm 0.30.0 (sdist") and a.skipped == ()


def test_import_star_honours_all_and_public_names(index, tmp_path):
    hidden = index.resolve("vllm_ascend.worker._HiddenHelper")
    assert not hidden and "has no top-level '_HiddenHelper'" in hidden.reason
    assert not python_says("import json, vllm_ascend.worker as w; print(json.dumps(hasattr(w, '_HiddenHelper')))")
    root = tmp_path / "plain"                              # no __all__: the public names only
    for rel, text in {"vllm_omni/__init__.py": "from .defs import *\n",
                      "vllm_omni/defs.py": "class Public: pass\nclass _Private: pass\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True); (root / rel).write_text(text)
    t = open_source(root)
    assert resolve(t, "vllm_omni.Public").dotted == "vllm_omni.defs.Public"
    assert not resolve(t, "vllm_omni._Private")


def test_a_submodule_is_an_attribute_of_its_package(tmp_path):
    "`import vllm_omni.a.b` then `vllm_omni.a.b.Base` as a base: the package `vllm_omni` binds no `a`, the submodule does."
    root = tmp_path / "sub"
    for rel, text in {"vllm_omni/__init__.py": "", "vllm_omni/a/__init__.py": "", "vllm_omni/a/b.py": "class Base:\n    def m(self): pass\n",
                      "vllm_omni/c.py": "import vllm_omni.a.b\nclass Child(vllm_omni.a.b.Base): pass\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True); (root / rel).write_text(text)
    t = open_source(root)
    assert resolve(t, "vllm_omni.c.Child.m").dotted == "vllm_omni.a.b.Base.m"


def test_cycles_and_missing_names_are_answers_that_name_the_sources(index):
    loop = index.resolve("vllm_ascend.cycle_a.Loop")
    assert isinstance(loop, Unresolved) and "import cycle" in loop.reason and "cycle_b" in loop.reason
    nope = index.resolve(f"{NPU}.npu_model_runner.OmniNPUModelRunner.no_such_method")
    assert not nope and "has no attribute 'no_such_method'" in nope.reason
    assert nope.searched == index.searched and all(s in str(nope) for s in index.searched)
    outside = index.resolve("torch.nn.Module")
    assert not outside and "not in vllm, vllm_ascend, vllm_omni" in outside.reason


def test_a_base_no_source_holds_stays_in_the_order(index):
    m = index.mro(f"{NPU}.outside.PluginARRunner")
    assert not m.complete and m.names()[:2] == [f"{NPU}.outside.PluginARRunner", "some_plugin.runners.PluginRunner"]
    assert [u.target for u in m.missing] == ["some_plugin.runners.PluginRunner"]
    a = index.attr(f"{NPU}.outside.PluginARRunner", "sample_tokens")   # found, but after a base no one could read
    assert a.path == "NPUARModelRunner.sample_tokens" and a.skipped == ("some_plugin.runners.PluginRunner",)
    gone = index.attr(f"{NPU}.outside.PluginARRunner", "forward")
    assert not gone and "bases outside the sources searched: PluginRunner" in gone.reason


def test_without_vllm_the_chain_says_where_it_leads(tmp_path):
    "An index without vllm: the re-exported forward-context name and the GPU base are not found, and say where they lead."
    ix = SymbolIndex.open(ROOTS["vllm_omni"], ROOTS["vllm_ascend"])
    fc = ix.defined_in(f"{NPU}.npu_model_runner", "set_forward_context")
    assert not fc and fc.target == "vllm.v1.worker.gpu_model_runner.set_forward_context"
    assert "outside vllm_omni, vllm_ascend" in fc.reason and len(fc.searched) == 2
    m = ix.mro(f"{NPU}.npu_model_runner.OmniNPUModelRunner")
    assert m.names()[-1] == "vllm.v1.worker.gpu_model_runner.GPUModelRunner" and len(m.missing) == 1


def test_an_installed_source_joins_the_index(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOTS["vllm_omni"]))
    monkeypatch.setenv("OMNI_NPU_PORT_SDIST_CACHE", "off")
    ix = SymbolIndex.open("vllm-omni", make_wheel(ROOTS["vllm_ascend"], tmp_path, "vllm-ascend", "0.30.0rc1"),
                          make_sdist(ROOTS["vllm"], tmp_path, "vllm", "0.30.0"))
    assert ix.trees["vllm_omni"].kind == "installed"
    assert ix.resolve(f"{NPU}.OmniNPUModelRunner._dummy_run").dotted == "vllm_ascend.worker.model_runner_v1.NPUModelRunner._dummy_run"


def test_inconsistent_bases_are_said_as_python_would(tmp_path):
    root = tmp_path / "bad"
    for rel, text in {"vllm_omni/__init__.py": "", "vllm_omni/m.py": "class A: pass\nclass B(A): pass\nclass C(A, B): pass\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True); (root / rel).write_text(text)
    with pytest.raises(TypeError, match="consistent method resolution"):
        exec((root / "vllm_omni/m.py").read_text(), {})
    m = mro(open_source(root), "vllm_omni.m.C")
    assert m.error and "consistent method resolution order" in m.error


def test_one_source_per_package(tmp_path):
    with pytest.raises(SourceError, match="two vllm sources"):
        SymbolIndex.open(ROOTS["vllm"], make_wheel(ROOTS["vllm"], tmp_path, "vllm", "0.30.0"))


def test_single_tree_callers_keep_their_answers():
    "conformance and port pass one SourceTree: same-source answers, `this source` in the reasons."
    t = open_source(ROOTS["vllm_ascend"])
    assert as_index(t) is as_index(t)
    r = resolve(t, "vllm_ascend.worker.model_runner_v1.NPUModelRunner.execute_model")
    assert not r and "bases outside this source: gmr.GPUModelRunner" in r.reason
    own = resolve(t, "vllm_ascend.worker.NPUModelRunner._dummy_run")
    assert own.path == "NPUModelRunner._dummy_run" and own.source.startswith("vllm_ascend ? (directory")
    assert class_attr(t, resolve(t, "vllm_ascend.worker.NPUModelRunner"), "_dummy_run").kind == "method"


def test_members_through_the_mro_and_derived_classes_wherever_they_live(index, tmp_path):
    members = index.members(f"{NPU}.npu_ar_model_runner.NPUARModelRunner")
    want = python_says(f"""
        import json, inspect
        from {NPU}.npu_ar_model_runner import NPUARModelRunner as C
        print(json.dumps({{n: v.__qualname__ for n, v in inspect.getmembers(C, inspect.isfunction)}}))""")
    assert {n: m.path for n, m in members.items() if m.kind == "method"} == want
    gpu = "vllm.v1.worker.gpu_model_runner.GPUModelRunner"
    found = [c.dotted for c in index.derived(gpu)]
    assert found == ["vllm_ascend.worker.model_runner_v1.NPUModelRunner", f"{NPU}.npu_ar_model_runner.NPUARModelRunner",
                     f"{NPU}.npu_model_runner.OmniNPUModelRunner", f"{NPU}.outside.PluginARRunner"]
    alone = SymbolIndex.open(ROOTS["vllm_omni"])                      # vllm-ascend not at hand: matched by the import's path
    assert [c.path for c in alone.derived("vllm_ascend.worker.NPUModelRunner")] == ["NPUARModelRunner", "OmniNPUModelRunner", "PluginARRunner"]
    broken = tmp_path / "broken"
    for rel, text in {"vllm_omni/__init__.py": "", "vllm_omni/ok.py": "from vllm_ascend.worker import NPUModelRunner\nclass R(NPUModelRunner): pass\n",
                      "vllm_omni/bad.py": "class Broken(NPUModelRunner:\n    pass\n"}.items():
        (broken / rel).parent.mkdir(parents=True, exist_ok=True); (broken / rel).write_text(text)
    ix = SymbolIndex.open(broken)
    assert [c.dotted for c in ix.derived("vllm_ascend.worker.NPUModelRunner")] == ["vllm_omni.ok.R"]
    assert list(ix.unreadable) == ["vllm_omni.bad"]


def test_the_index_opens_source_specs(release_source):
    "`SymbolIndex.open` takes what `--source` takes: a release from the package cache, PATH@VERSION."
    release_source("vllm-ascend==0.18.0")                                    # in the package cache
    ix = SymbolIndex.open("vllm-ascend==0.18.0", f"{ROOTS['vllm_omni']}@0.18.0")
    assert (ix.trees["vllm_ascend"].version, ix.trees["vllm_omni"].version_from) == ("0.18.0", "given")
    r = ix.resolve(f"{NPU}.npu_model_runner.OmniNPUModelRunner.execute_model")
    assert r.path == "OmniNPUModelRunner.execute_model" and r.source.startswith("vllm_omni 0.18.0 (directory")
    m = ix.mro(f"{NPU}.npu_model_runner.OmniNPUModelRunner")    # the real 0.18.0 does not re-export its runner from vllm_ascend.worker
    assert m.names()[2] == "NPUModelRunner" and "vllm_ascend.worker has no top-level 'NPUModelRunner'" in m.missing[0].reason
    assert "vllm_ascend 0.18.0" in str(m.missing[0])                      # and says which source it searched


def test_a_conditional_import_falls_back_as_python_does(tmp_path):
    "`try: from .new import X` / `except ImportError: from .old import X`: where the source lacks `new`, `old`'s X, as Python finds it."
    root = tmp_path / "cond"
    files = {"vllm_omni/__init__.py": "", "vllm_omni/old.py": "class Runner:\n    pass\n",
             "vllm_omni/user.py": ("try:\n    from vllm_omni.new import Runner\nexcept ImportError:\n    from vllm_omni.old import Runner\n"
                                   "try:\n    from vllm_omni.old import Gone\nexcept ImportError:\n    from vllm_omni.old import Runner as Gone\n"
                                   "try:\n    from vllm.v99 import Outside\nexcept ImportError:\n    from vllm_omni.old import Runner as Outside\n")}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True); (root / rel).write_text(text)
    out = subprocess.run([sys.executable, "-c", "import json, vllm_omni.user as u; print(json.dumps([f'{c.__module__}.{c.__qualname__}' for c in (u.Runner, u.Gone)]))"],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root)}, check=True)
    t = open_source(root)
    assert [resolve(t, f"vllm_omni.user.{n}").dotted for n in ("Runner", "Gone")] == json.loads(out.stdout)
    outside = resolve(t, "vllm_omni.user.Outside")     # the first import leaves the sources: unknown, never guessed
    assert not outside and outside.target == "vllm.v99.Outside"
