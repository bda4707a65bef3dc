"""`omni-npu-port audit` on any layout: runners found by what they derive from, paired across files and layouts,
methods followed through bases in other files, versions read as port reads them (tests/fixtures/audit)."""
import importlib
import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from omni_npu_port.cli.main import main
from omni_npu_port.core.catalog import CATALOG
from omni_npu_port.port import audit
from omni_npu_port.port.locate import PortError, open_tree
from omni_npu_port.port.translation import target_of
from omni_npu_port.sources.symbols import SymbolIndex

AF = Path(__file__).parent / "fixtures" / "audit"


def codes(found):
    return {(f.code, f.cls, f.method) for f in found}


def copy_tree(name, tmp_path):
    return Path(shutil.copytree(AF / name, tmp_path / name))


def runners_of(source):
    tree = open_tree(str(source))
    graph = audit.ClassGraph(SymbolIndex([tree]))
    return graph, audit.find_runners(graph, tree)


# --- runners found by what they are -------------------------------------------------------------------------
def test_runner_bases_are_the_catalogs_runner_classes():
    gpu, npu = audit.runner_bases()
    assert [b.dotted for b in gpu] == [CATALOG["sig.dummy-run-gpu"].gpu_sym.parent]
    assert [b.dotted for b in npu] == [CATALOG["sig.dummy-run"].npu_sym.parent]
    assert audit.device_markers() == ("GPU", "NPU")


def test_older_layout_is_read_as_a_directory_and_audits_clean():
    "vllm_omni/worker/npu/ (older releases) was refused: 'needs vllm_omni/platforms/npu/worker/'."
    assert audit.audit(str(AF / "old_layout"), str(AF / "old_layout")) == []
    assert audit.audit(str(AF / "old_layout"), str(AF / "old_layout/vllm_omni/worker/npu")) == []


def test_runners_found_through_chains_of_classes_across_files_and_aliases():
    _, old = runners_of(AF / "old_layout")
    assert {c.name for c in old.gpu} == {"OmniGPUModelRunner", "GPUARModelRunner", "GPUTalkerModelRunner"}
    assert {c.name for c in old.npu} == {"OmniNPUModelRunner", "NPUARModelRunner", "NPUTalkerModelRunner"}
    assert [c.name for c in old.other_devices] == ["XPUARModelRunner"]     # another device's port: no NPU copy owed
    _, new = runners_of(AF / "new_layout")   # NPUModelRunner imported `as AscendRunner`; a base through a re-export
    assert "OmniNPUModelRunner" in {c.name for c in new.npu}
    assert {"GPUARModelRunner", "Code2WavGPURunner"} <= {c.name for c in new.gpu}
    assert not new.by_name and not old.by_name


def test_method_resolution_order_is_pythons(tmp_path):
    "A diamond across four files: the graph's MRO and the class it takes a method from are Python's own answer."
    pkg = tmp_path / "vllm_omni"
    (pkg / "d").mkdir(parents=True)
    files = {"__init__.py": "", "a.py": "class A:\n    def f(self): return 'A'\n",
             "b.py": "from vllm_omni.a import A\nclass B(A):\n    pass\n",
             "c.py": "from .a import A\nclass C(A):\n    def f(self): return 'C'\n",
             "d/__init__.py": "", "d/m.py": "from ..b import B\nfrom vllm_omni.c import C as Sea\nclass D(B, Sea):\n    pass\n"}
    for rel, text in files.items(): (pkg / rel).write_text(text)
    tree = open_tree(str(tmp_path))
    graph = audit.ClassGraph(SymbolIndex([tree]))
    d = graph.cls("vllm_omni.d.m", tree.module_ast("vllm_omni.d.m").body[-1])
    sys.path.insert(0, str(tmp_path))
    try:
        real = importlib.import_module("vllm_omni.d.m").D
        assert [c.name for c in graph.mro(d)] == [k.__name__ for k in real.__mro__ if k is not object]
        assert graph.method(d, "f")[0].name == real().f()
    finally:
        sys.path.remove(str(tmp_path))
        for m in [m for m in sys.modules if m == "vllm_omni" or m.startswith("vllm_omni.")]: del sys.modules[m]


# --- pairing --------------------------------------------------------------------------------------------------
def test_unpaired_runners_are_findings_and_a_differently_named_copy_pairs_by_its_base():
    found = audit.audit(str(AF / "new_layout"), str(AF / "new_layout"))
    assert codes(found) == {("ONP4206", "GPUGenerationModelRunner", ""), ("ONP4205", "NPUTTSModelRunner", "")}
    tts = next(f for f in found if f.code == "ONP4205")
    assert "GPUTTSModelRunner" in tts.message and "GPUARModelRunner" in tts.message   # what was looked for, what exists
    graph, r = runners_of(AF / "new_layout")
    pairs = audit.pair_runners(r, r)
    assert ("Code2WavGPURunner", "AscendCode2WavRunner", "base") in [(g.name, n.name, how) for g, n, how in pairs.pairs]


def test_pairs_across_layouts_and_releases():
    "GPU runners of the older layout against NPU runners of the newer one: paired by class, never by module path."
    found = audit.audit(str(AF / "old_layout"), str(AF / "new_layout"))
    assert {(f.code, f.cls) for f in found if f.code in ("ONP4205", "ONP4206")} == {
        ("ONP4206", "GPUTalkerModelRunner"), ("ONP4205", "NPUTTSModelRunner"), ("ONP4205", "AscendCode2WavRunner")}
    # the pairs are made: what the older GPU runners have and the newer NPU copies lack is named per pair
    assert {("ONP4202", "NPUARModelRunner", "execute_model"), ("ONP4202", "OmniNPUModelRunner", "talker_forward")} <= codes(found)
    assert "GPUARModelRunner.execute_model" in next(f.message for f in found if f.method == "execute_model")


# --- inheritance across files ----------------------------------------------------------------------------------
def test_a_method_inherited_from_another_file_is_compared_there(tmp_path):
    "NPUARModelRunner.talker_forward is checked against OmniGPUModelRunner.talker_forward, which GPUARModelRunner inherits."
    root = copy_tree("old_layout", tmp_path)
    gpu = root / "vllm_omni/worker/gpu_model_runner.py"
    gpu.write_text(gpu.read_text().replace("ids = self.talker_prepare(ids)", "ids = self.talker_prepare(ids, self.text_step)"))
    found = audit.audit(str(root), str(root))
    drift = [f for f in found if (f.code, f.cls, f.method) == ("ONP4201", "NPUARModelRunner", "talker_forward")]
    assert drift and "OmniGPUModelRunner.talker_forward" in drift[0].message
    assert drift[0].detail == ["- ids = self.talker_prepare(ids)"]   # the NPU copy's line the GPU side changed
    assert not [f for f in found if f.code == "ONP4204"]


def test_lone_files_whose_bases_are_elsewhere_say_so_instead_of_calling_methods_missing():
    found = audit.audit(str(AF / "files/gpu_ar.py"), str(AF / "files/npu_ar.py"))
    assert {f.code for f in found} == {"ONP4207"} and all(f.severity == "info" for f in found)
    assert any("vllm_omni.worker.gpu_model_runner.OmniGPUModelRunner" in f.message for f in found)
    # with the file that defines the base, the inherited method is found and compared (no drift: in sync)
    found = audit.audit(str(AF / "files"), str(AF / "files"))
    assert not [f for f in found if f.code in ("ONP4201", "ONP4204")]
    assert ("ONP4206", "OmniGPUModelRunner", "") in codes(found)    # no OmniNPUModelRunner among the files given


def test_an_npu_override_of_vllm_ascends_own_method_is_no_orphan(tmp_path):
    root = copy_tree("old_layout", tmp_path)
    npu = root / "vllm_omni/worker/npu/npu_ar_model_runner.py"
    npu.write_text(npu.read_text() + "\n    def capture_model(self):\n        return None\n")
    assert ("ONP4204", "NPUARModelRunner", "capture_model") in codes(audit.audit(str(root), str(root)))
    with_base = audit.audit(str(root), str(root), str(AF / "ascend_0_12"))
    assert ("ONP4204", "NPUARModelRunner", "capture_model") not in codes(with_base)


# --- versions ---------------------------------------------------------------------------------------------------
def test_versions_are_resolved_as_port_resolves_them():
    rules, notes = audit.audit_rules("0.12.0rc1")
    assert rules.target == target_of(SimpleNamespace(package="vllm_ascend", version="0.12.0rc1"))
    assert [d.code for d in notes] == ["ONP4104"] and "0.12.0rc1" in notes[0].message
    assert audit.audit_rules("0.18.0")[0] is audit.audit_rules("vllm-ascend==0.18.0")[0] and audit.audit_rules("0.18.0")[1] == []
    base = open_tree(str(AF / "ascend_0_12"))
    assert audit.audit_rules(None, base)[0].target == target_of(base)
    with pytest.raises(PortError, match="--target 'vllm==0.18.0'"): audit.audit_rules("vllm==0.18.0")
    with pytest.raises(PortError, match="--target 'nonsense'"): audit.audit_rules("nonsense")


def test_a_release_the_catalog_lacks_is_a_note_that_does_not_fail_the_gate(capsys):
    rc = main(["audit", "--gpu", str(AF / "old_layout"), "--npu", str(AF / "old_layout"), "--npu-base", str(AF / "ascend_0_12")])
    out = capsys.readouterr().out
    assert rc == 0 and "ONP4104" in out and "(note)" in out and "0 finding(s); 2 note(s)" in out
    assert "ONP2055" in out   # and the derived rules say they did not run: no cached sources of that target
    rc = main(["audit", "--gpu", str(AF / "new_layout"), "--npu", str(AF / "new_layout"), "--target", "0.12.0rc1", "--json"])
    found = json.loads(capsys.readouterr().out)
    assert rc == 1 and {f["severity"] for f in found} == {"info", "warning"}


# --- never refuse silently --------------------------------------------------------------------------------------
def test_a_source_without_runners_is_an_error_naming_what_was_searched(capsys):
    with pytest.raises(PortError) as e: audit.audit(str(AF / "no_runners"), str(AF / "old_layout"))
    msg = str(e.value)
    assert "searched 2 module(s)" in msg and "vllm.v1.worker.gpu_model_runner.GPUModelRunner" in msg and "give the" in msg
    assert main(["audit", "--gpu", str(AF / "old_layout"), "--npu", str(AF / "old_layout/vllm_omni/worker/talker")]) == 2
    err = capsys.readouterr().err
    assert "no NPU runner class found" in err and "vllm_omni.worker.talker" in err and err.count("\n") == 1
    assert main(["audit", "--gpu", str(AF / "ascend_0_12"), "--npu", str(AF / "old_layout")]) == 2
    assert "not vllm-omni" in capsys.readouterr().err


def test_a_module_that_does_not_parse_is_named_not_fatal(tmp_path):
    root = copy_tree("old_layout", tmp_path)
    (root / "vllm_omni/worker/npu/npu_broken.py").write_text(
        "from .npu_model_runner import OmniNPUModelRunner\n\n\nclass NPUBrokenModelRunner(OmniNPUModelRunner):\n    def f(self)\n        pass\n")
    found = audit.audit(str(root), str(root))
    assert [(f.code, f.severity) for f in found] == [("ONP4208", "info")]
    assert "vllm_omni.worker.npu.npu_broken" in found[0].message and "line 5" in found[0].message


def test_a_base_imported_in_branches_is_read_in_every_branch(tmp_path):
    "`if …: from … import NPUModelRunner310 as NPUModelRunner / else: from … import NPUModelRunner` (vLLM-Omni 0.30's form)."
    root = copy_tree("old_layout", tmp_path)
    npu = root / "vllm_omni/worker/npu/npu_model_runner.py"
    npu.write_text(npu.read_text().replace(
        "from vllm_ascend.worker.model_runner_v1 import NPUModelRunner\n",
        "if is_small_chip():\n    from vllm_ascend.small.runner import NPUModelRunnerSmall as NPUModelRunner\n"
        "else:\n    from vllm_ascend.worker.model_runner_v1 import NPUModelRunner\n"))
    graph, r = runners_of(root)
    assert {c.name for c in r.npu} == {"OmniNPUModelRunner", "NPUARModelRunner", "NPUTalkerModelRunner"}
    assert audit.audit(str(root), str(root)) == []


def test_only_a_device_word_makes_another_devices_port(tmp_path):
    "XPUARModelRunner(GPUARModelRunner) is another device's port; OmniARModelRunner(OmniGPUModelRunner) is a GPU runner."
    root = copy_tree("old_layout", tmp_path)
    (root / "vllm_omni/worker/omni_ar.py").write_text(
        "from vllm_omni.worker.gpu_model_runner import OmniGPUModelRunner\n\n\nclass OmniARModelRunner(OmniGPUModelRunner):\n    pass\n")
    _, r = runners_of(root)
    assert "OmniARModelRunner" in {c.name for c in r.gpu} and [c.name for c in r.other_devices] == ["XPUARModelRunner"]
    assert ("ONP4206", "OmniARModelRunner", "") in codes(audit.audit(str(root), str(root)))


def test_the_older_layout_as_a_wheel_and_an_sdist(tmp_path, monkeypatch):
    "open_source's other kinds of source: the same runners found and paired in a wheel and an sdist."
    monkeypatch.setenv("OMNI_NPU_PORT_SDIST_CACHE", "off")   # no cache entry for a test's sdist
    import tarfile
    import zipfile
    root = AF / "old_layout"
    files = [p for p in sorted(root.rglob("*.py"))]
    whl = tmp_path / "vllm_omni-0.9.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for p in files: z.write(p, p.relative_to(root).as_posix())
        z.writestr("vllm_omni-0.9.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: vllm-omni\nVersion: 0.9.0\n")
    sdist = tmp_path / "vllm_omni-0.9.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as t:
        for p in files: t.add(p, f"vllm_omni-0.9.0/{p.relative_to(root).as_posix()}")
    for source in (whl, sdist):
        assert audit.audit(str(source), str(source)) == []
        _, r = runners_of(source)
        assert {c.name for c in r.npu} == {"OmniNPUModelRunner", "NPUARModelRunner", "NPUTalkerModelRunner"}, source


def test_findings_point_at_the_npu_runners_file_and_line_in_every_output_format(tmp_path, capsys):
    "audit's findings as `path:line: CODE message` lines, SARIF and GitHub annotations: the line is the file's."
    gpu, npu = tmp_path / "gpu_r.py", tmp_path / "npu_r.py"
    gpu.write_text("from vllm.v1.worker.gpu_model_runner import GPUModelRunner\nimport torch\n\n\n"
                   "class OmniGPUModelRunner(GPUModelRunner):\n    def step(self, x):\n        torch.cuda.synchronize()\n"
                   "        return x * 2\n")
    npu.write_text("from vllm_ascend.worker.model_runner_v1 import NPUModelRunner\nimport torch\n\n\n"
                   "class OmniNPUModelRunner(NPUModelRunner):\n    @staticmethod\n    def helper():\n        return 1\n\n"
                   "    def step(self, x):\n        torch.cuda.synchronize()\n        return x * 2\n")
    lines = npu.read_text().splitlines()
    assert main(["audit", "--gpu", str(gpu), "--npu", str(npu)]) == 1
    text = [l for l in capsys.readouterr().out.splitlines() if l.startswith(f"{npu}:")]
    at = {l.split(": ")[1].split()[0]: int(l.split(":")[1]) for l in text}
    assert "torch.cuda.synchronize()" in lines[at["ONP4203"] - 1] and "def helper" in lines[at["ONP4204"] - 1]
    assert all(l.startswith(f"{npu}:") for l in text)
    assert main(["audit", "--gpu", str(gpu), "--npu", str(npu), "--output-format", "sarif"]) == 1
    res = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert {r["ruleId"]: r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in res} == at
    assert main(["audit", "--gpu", str(gpu), "--npu", str(npu), "--output-format", "github"]) == 1
    assert all(l.startswith("::warning file=") for l in capsys.readouterr().out.splitlines())
