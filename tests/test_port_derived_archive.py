"""Derived rules through a vLLM-Omni archive (issue 33): `port` and the audit read omni from a wheel or sdist, so a
runner built on vllm's through a class or mixin of omni's own package is followed there as `translate` follows it on
disk. Fixtures: a tiny vllm_omni wheel written here over tests/fixtures/derived's vllm / vllm_ascend doubles."""
import ast
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from omni_npu_port.port import derived_check as DC
from omni_npu_port.port import pipeline, release
from omni_npu_port.sources.readers import open_source
from omni_npu_port.translate import derived as D

FX = Path(__file__).parent / "fixtures" / "derived"
MEMBERS = {
    "vllm_omni/__init__.py": "",
    "vllm_omni/worker/__init__.py": "",
    "vllm_omni/worker/mixins.py": "class CacheMixin:\n    def setup(self):\n        self.mixed = 1\n\n"
                                  "class PlainMixin:\n    pass\n",
    # the runner's base: vllm's runner beside a mixin, in a module of its own (relative import of the mixin)
    "vllm_omni/worker/gpu_model_runner.py": "from vllm.v1.worker.gpu_model_runner import GPUModelRunner\n"
                                            "from .mixins import CacheMixin\n\n"
                                            "class OmniRunner(CacheMixin, GPUModelRunner):\n    pass\n",
}
# omni's own runner (an input of the port): built on vllm's through OmniRunner, another module of its package
OMNI = ("from vllm_omni.worker.gpu_model_runner import OmniRunner\n\n"
        "class ARRunner(OmniRunner):\n    def step(self):\n        return self.mixed, self.cudagraph_mode\n")
# what a port writes: omni's class beside the NPU runner; one attribute omni's runner uses, one of the port's own
WRITTEN = ("from vllm_ascend.worker.model_runner_v1 import NPUModelRunner\n"
           "from vllm_omni.worker.gpu_model_runner import OmniRunner\n\n"
           "class NPUARRunner(OmniRunner, NPUModelRunner):\n    def step(self):\n"
           "        return self.mixed, self.cudagraph_mode\n\n"
           "    def more(self):\n        return self.cudagraph_mode\n")
# the same, built on a mixin of omni's that does not reach vllm
PLAIN = WRITTEN.replace("import OmniRunner", "import OmniRunner\nfrom vllm_omni.worker.mixins import PlainMixin") \
    .replace("(OmniRunner, NPUModelRunner)", "(PlainMixin, NPUModelRunner)")


@pytest.fixture(scope="module")
def ix():
    return D.DerivedIndex(open_source(FX / "vllm", "vllm"), open_source(FX / "ascend", "vllm_ascend"))


@pytest.fixture
def wheel(tmp_path):
    dest = tmp_path / "vllm_omni-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(dest, "w") as z:
        for name, text in MEMBERS.items(): z.writestr(name, text)
    return dest


def _attrs(found) -> set:
    return {(f.diagnostic.code, f.diagnostic.line, f.subject) for f in found
            if f.subject in ("mixed", "cudagraph_mode")}


def test_a_runner_built_on_vllm_through_its_packages_classes_in_an_archive_is_followed(ix, wheel):
    read = D.source_reader(open_source(wheel))
    got = ix.file_findings(ast.parse(OMNI), read)
    # vllm's runner has cudagraph_mode, its NPU twin does not; `mixed` is the mixin's (read through a relative import)
    assert _attrs(got) == {("ONP2041", 5, "cudagraph_mode")}
    assert "built on it through vllm_omni.worker.gpu_model_runner.OmniRunner" in got[0].diagnostic.message
    assert _attrs(ix.file_findings(ast.parse(OMNI))) == set()   # no reader: the base is only a name


def test_a_mixin_that_does_not_reach_vllm_is_not_taken_for_the_runner(ix, wheel):
    read = D.source_reader(open_source(wheel))
    src = "from vllm_omni.worker.mixins import PlainMixin\n\nclass R(PlainMixin):\n    def f(self):\n" \
          "        return self.cudagraph_mode, self.missing_here\n"
    assert _attrs(ix.file_findings(ast.parse(src), read)) == set()


def test_the_reader_answers_its_packages_modules_only_and_holds_a_bounded_number():
    asked = []
    def module_source(m):
        asked.append(m)
        return "" if m != "vllm_omni.bad" else "def (:\n"
    src = SimpleNamespace(package="vllm_omni", module_source=module_source, file_of=lambda m: m + ".py")
    read = D.source_reader(src, kept=2)
    assert read("vllm.v1.worker.gpu_model_runner") is None and asked == []   # another package's: never read
    assert read("vllm_omni.bad") is None   # a module that does not parse is no class
    read("vllm_omni.a"), read("vllm_omni.b"), read("vllm_omni.a")
    assert asked == ["vllm_omni.bad", "vllm_omni.a", "vllm_omni.b"]   # held: read once
    read("vllm_omni.c"), read("vllm_omni.a")   # two held at most: `a` was let go
    assert asked[-2:] == ["vllm_omni.c", "vllm_omni.a"] and D.source_reader(None) is None


def test_a_member_past_the_file_limit_is_not_read(ix, wheel, monkeypatch):
    monkeypatch.setenv("OMNI_NPU_PORT_MAX_FILE_MB", "0.00001")   # 10 bytes: every member with text is past it
    read = D.source_reader(open_source(wheel))
    assert read("vllm_omni.worker.gpu_model_runner")[0] == {}   # read as the tree reads it: empty, recorded unreadable
    assert _attrs(ix.file_findings(ast.parse(OMNI), read)) == set()


def test_port_fires_through_the_archive_and_what_omni_has_is_inherited(wheel):
    p = SimpleNamespace(code=WRITTEN, path="npu_ar_runner.py", not_ready=[])
    assert DC.check_ports([p], FX / "vllm", FX / "ascend", [[OMNI]], {}, wheel) == []
    # line 6 reads as omni's line 5 (inherited); line 9 is the port's own
    assert {(d.code, d.line) for d in p.derived.port} == {("ONP2041", 9)}
    assert {(d.code, d.line) for d in p.derived.inherited} == {("ONP2041", 6)}
    q = SimpleNamespace(code=WRITTEN, path="npu_ar_runner.py", not_ready=[])
    DC.check_ports([q], FX / "vllm", FX / "ascend", [[OMNI]], {})   # no omni sources: not followed, as before
    assert q.derived.port == [] and q.derived.inherited == []


def test_port_is_quiet_where_the_mixin_does_not_reach_vllm(wheel):
    p = SimpleNamespace(code=PLAIN, path="npu_ar_runner.py", not_ready=[])
    DC.check_ports([p], FX / "vllm", FX / "ascend", [[OMNI]], {}, wheel)
    assert p.derived.port == [] and p.derived.inherited == []


def test_warm_derived_reads_the_archive_as_check_ports_does(wheel):
    warmed, bare = {}, {}
    DC.warm_derived(FX / "vllm", FX / "ascend", [OMNI], warmed, wheel)
    DC.warm_derived(FX / "vllm", FX / "ascend", [OMNI], bare)
    assert ("ONP2041", "cudagraph_mode", "return self.mixed, self.cudagraph_mode") in warmed[OMNI]
    assert not any(k[1] == "cudagraph_mode" for k in bare[OMNI])


def test_sources_that_cannot_be_opened_leave_the_rules_running_without_them(tmp_path):
    assert DC.package_reader(None) is None and DC.package_reader(tmp_path / "no-such.whl") is None
    p = SimpleNamespace(code=WRITTEN + 'x = "cuda"\n', path="m.py", not_ready=[])
    DC.check_ports([p], FX / "vllm", FX / "ascend", [[]], {}, tmp_path / "no-such.whl")
    assert [d.code for d in p.derived.port] == ["ONP2043"]


def _copy(text, name):
    node = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef) and n.name == name)
    return SimpleNamespace(module="vllm_omni.platforms.npu.worker.npu_ar_runner", text=text, name=name, node=node)


def test_the_audit_sees_drift_through_the_copys_package_and_not_where_it_does_not_reach_vllm(ix, wheel):
    read = D.source_reader(open_source(wheel))
    got = DC.audit_derived([_copy(WRITTEN, "NPUARRunner")], ix, [], read=read)
    assert sorted((d.code, d.line, d.where) for d in got) == [("ONP2056", 6, "NPUARRunner"),
                                                               ("ONP2056", 9, "NPUARRunner")]
    assert "ONP2041" in got[0].message and "cudagraph_mode" in got[0].message
    assert DC.audit_derived([_copy(WRITTEN, "NPUARRunner")], ix, []) == []   # no reader: as before
    assert DC.audit_derived([_copy(PLAIN, "NPUARRunner")], ix, [], read=read) == []


def test_port_and_release_hand_the_omni_sources_to_the_derived_pass(monkeypatch):
    seen = {}
    monkeypatch.setattr(pipeline, "check_ports", lambda *a: seen.setdefault("check", a) and [])
    monkeypatch.setattr(release, "warm_derived", lambda *a: seen.setdefault("warm", a))
    monkeypatch.setattr(release, "start_judge", lambda *a, **k: None)
    ctx = SimpleNamespace(judge_inputs=("ASCEND", "VLLM", "OMNI", ("m", "C")), derived_memo={}, found={}, judge=False)
    pipeline._derived([], ctx)
    release.release_meanwhile(ctx, [], [], ["text"])()
    assert seen["check"][-1] == "OMNI" and seen["warm"][-1] == "OMNI"


def test_a_written_runner_built_on_another_written_module_reads_it_as_written(wheel):
    base = SimpleNamespace(code=WRITTEN, path="npu_runner.py", not_ready=[], module="vllm_omni.npu.npu_runner")
    ar = "from vllm_omni.npu.npu_runner import NPUARRunner\n\nclass Talker(NPUARRunner):\n" \
         "    def talk(self):\n        return self.mixed, self.cudagraph_mode\n"
    runner = SimpleNamespace(code=ar, path="npu_talker.py", not_ready=[], module="vllm_omni.npu.npu_talker")
    DC.check_ports([base, runner], FX / "vllm", FX / "ascend", [[], []], {}, wheel)
    assert {(d.code, d.line) for d in runner.derived.port} == {("ONP2041", 5)}   # through the written module
    alone = SimpleNamespace(code=ar, path="npu_talker.py", not_ready=[], module="vllm_omni.npu.npu_talker")
    DC.check_ports([alone], FX / "vllm", FX / "ascend", [[]], {}, wheel)   # its base neither written nor in the archive
    assert alone.derived.port == []


def test_the_audit_hands_the_copys_package_reader_to_the_derived_pass(tmp_path, monkeypatch):
    from omni_npu_port.port import audit as A
    fix = Path(__file__).parent / "fixtures"
    omni, stack = fix / "update" / "omni_prev", fix / "generalize" / "stack"
    seen = []
    monkeypatch.setattr(A, "audit_derived", lambda *a: seen.append(a) or [])
    A.audit(str(omni), str(omni), str(omni), sources=(str(stack / "vllm"), str(stack / "vllm_ascend")),
            cache_dir=tmp_path / "cache", index="http://127.0.0.1:9/")
    [(copies, _, _, _, read)] = seen
    assert [c.name for c in copies] == ["OmniNPUModelRunner"]
    # the copy's bases are read from its own release: omni's GPU runner, which the copy is built on
    assert "OmniGPUModelRunner" in read("vllm_omni.worker.gpu_model_runner")[0]
