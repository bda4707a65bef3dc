"""The judge (issue 31, part 1): basedpyright over the written modules, each error the port introduced a code, what the
inputs already have inherited, named exclusions, "unverified" when it cannot run.

Fixtures are written here: a tiny `vllm` / `vllm_ascend` / `vllm_omni` tree in a temp folder. The tests that run
basedpyright share one run per fixture (module scope): each run costs seconds."""
import re
import ast
import json
from pathlib import Path
from textwrap import dedent

import pytest

from omni_npu_port.cli.main import main
from omni_npu_port.port import judge as J
from omni_npu_port.port.release import port_release, release_markdown
from omni_npu_port.port.release_checks import RunnerPort

FIX = Path(__file__).parent / "fixtures" / "release"
SOURCES = [FIX / "vllm", FIX / "vllm_ascend", FIX / "vllm_old"]

VLLM = '''
class GPUModelRunner:
    def __init__(self):
        self.device = "cuda"
    def _dummy_run(self, num_tokens):
        return num_tokens
'''
ASCEND = '''
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

def helper(a):
    return a

class NPUModelRunner(GPUModelRunner):
    def __init__(self):
        super().__init__()
        self.npu_stream = None
    def _dummy_run(self, num_tokens, *, is_profile=False):
        return num_tokens
    def load(self):
        return legacy_flag
'''
OMNI_GPU = '''
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

class OmniGPUModelRunner(GPUModelRunner):
    def sample(self):
        return helper_gpu(self.device)
'''
# the port: the long class order puts vllm's GPUModelRunner (no `is_profile`) ahead of the NPU runner's `_dummy_run`
PORT = '''
import torch
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
from vllm_ascend.worker.model_runner_v1 import NPUModelRunner, helper
from vllm_ascend.worker.model_runner_v1 import NoSuchName
from vllm_omni.worker.gpu_model_runner import OmniGPUModelRunner
import vllm_ascend.no_such_module


class Other:
    pass


class OmniNPUModelRunner(OmniGPUModelRunner, GPUModelRunner, NPUModelRunner):
    def load(self):
        return legacy_flag

    def sample(self):
        return helper_gpu(self.device)

    def run(self, flag):
        if flag:
            late = 1
        print(late_name)
        late_name = 2
        bound = helper(a=1)
        helper(a=1, b=2)
        self._dummy_run(8, is_profile=True)
        self._dummy_run(8, remove_lora=True)
        torch.npu.synchronize()
        Other().anything
        return self.npu_stream, self.device, self.nowhere, bound, fresh_name
'''


def _line(text, needle):
    return next(i for i, l in enumerate(dedent(text).splitlines(), 1) if needle in l)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("judge")
    files = {"src/vllm/__init__.py": "", "src/vllm/v1/__init__.py": "", "src/vllm/v1/worker/__init__.py": "",
             "src/vllm/v1/worker/gpu_model_runner.py": VLLM, "src/vllm_ascend/__init__.py": "",
             "src/vllm_ascend/worker/__init__.py": "", "src/vllm_ascend/worker/model_runner_v1.py": ASCEND,
             "omni/vllm_omni/__init__.py": "", "omni/vllm_omni/worker/__init__.py": "",
             "omni/vllm_omni/worker/gpu_model_runner.py": OMNI_GPU}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(dedent(text))
    return root


@pytest.fixture(scope="module")
def judged(tree):
    "One basedpyright run over the port, its inputs checked in the same run."
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(tree / "cache"))
        ins = [tree / "src/vllm_ascend/worker/model_runner_v1.py", tree / "omni/vllm_omni/worker/gpu_model_runner.py"]
        got, run = J.judge_modules({"vllm_omni.platforms.npu.worker.npu_model_runner": dedent(PORT)},
                                   {"vllm_omni.platforms.npu.worker.npu_model_runner": ins},
                                   [tree / "src", tree / "omni"], tree / "omni",
                                   (str(ins[0]), "NPUModelRunner"))
        again = J.judge_modules({"pkg.other": "x = 1\n"}, {"pkg.other": ins}, [tree / "src", tree / "omni"])[1]
    return got["vllm_omni.platforms.npu.worker.npu_model_runner"], run, again


def _at(diags, needle):
    "The codes of the diagnostics on the port's line holding `needle`."
    return sorted(d.code for d in diags if d.line == _line(PORT, needle))


@pytest.mark.slow
def test_each_code_fires_where_the_port_introduced_the_error(judged):
    j, run, _ = judged
    assert run.status == "judged" and j.judged
    assert _at(j.port, "print(late_name)") == ["ONP4441"]                   # used before it is bound
    assert "ONP4441" in _at(j.port, "fresh_name") and "ONP4443" in _at(j.port, "fresh_name")   # undefined; self.nowhere
    assert _at(j.port, "helper(a=1, b=2)") == ["ONP4442"]                   # `b` binds to nothing
    assert _at(j.port, "remove_lora=True") == ["ONP4442"]                   # neither runner's _dummy_run takes it
    assert _at(j.port, "import NoSuchName") == ["ONP4444"] and _at(j.port, "no_such_module") == ["ONP4444"]
    assert all(d.path == "vllm_omni/platforms/npu/worker/npu_model_runner.py" and d.severity == "error" for d in j.port)


@pytest.mark.slow
def test_no_code_fires_where_the_port_is_right(judged):
    j, _, _ = judged
    for ok in ("bound = helper(a=1)", "import NPUModelRunner, helper", "Other().anything", "if flag:"):
        assert _at(j.port, ok) == [], ok                                       # binds; resolves; not `self.`; fine
    names = {d.message.split('"')[1] for d in j.port if d.code == "ONP4443"}
    assert names == {"nowhere"}                                      # self.npu_stream, self.device: in the order


@pytest.mark.slow
def test_an_error_the_inputs_have_at_the_same_statement_is_inherited(judged):
    j, run, again = judged
    assert _at(j.inherited, "return legacy_flag") == ["ONP4445"]             # the NPU base's own undefined name
    assert _at(j.inherited, "helper_gpu(self.device)") == ["ONP4445"]        # omni's GPU runner's
    assert _at(j.port, "return legacy_flag") == [] and _at(j.port, "fresh_name").count("ONP4441") == 1
    assert (run.inputs_checked, run.inputs_kept) == (2, 0) and (again.inputs_checked, again.inputs_kept) == (0, 2)


@pytest.mark.slow
def test_the_named_exclusions_fire_only_on_their_case(judged):
    j, _, _ = judged
    assert _at(j.excluded, "is_profile=True") == ["ONP4446"] and _at(j.port, "is_profile=True") == []
    assert _at(j.excluded, "torch.npu.synchronize") == ["ONP4446"]
    assert j.exclusions() == {"npu-method-binds": 1, "torch-npu-namespace": 1}
    assert _at(j.excluded, "remove_lora") == []                              # neither binds: the port's
    assert all("excluded by rule" in d.message for d in j.excluded)


def test_the_npu_method_rule_binds_by_the_npu_signature_as_written():
    fn = ast.parse("def m(self, a, b=1, *, c=2): ...").body[0]
    call = lambda s: ast.parse(s).body[0].value
    assert J.binds(fn, call("self.m(1, c=3)"), False) and J.binds(fn, call("Base.m(self, 1, 2)"), True)
    assert not J.binds(fn, call("self.m(1, d=3)"), False) and not J.binds(fn, call("self.m()"), False)
    assert not J.binds(fn, call("self.m(*xs)"), False)                      # not decided: never excluded
    assert J.called_method(call("other.m(1)")) is None


def test_an_attribute_is_judged_only_on_self_or_a_module():
    err = lambda msg, line, col: {"rule": "reportAttributeAccessIssue", "message": msg,
                                  "range": {"start": {"line": line, "character": col}}}
    lines = ["x = self.gone", "y = obj.gone", "import torch; torch.npu"]
    assert J.judged_code(err('Cannot access attribute "gone"', 0, 9), lines) == "ONP4443"
    assert J.judged_code(err('Cannot access attribute "gone"', 1, 8), lines) is None
    assert J.judged_code(err('"npu" is not a known attribute of module "torch"', 2, 20), lines) == "ONP4444"
    assert J.judged_code({"rule": "reportArgumentType", "message": "", "range": {}}, lines) is None


def test_an_unavailable_checker_leaves_every_module_unverified(tmp_path):
    got, run = J.judge_modules({"m.port": "x = 1\n"}, {}, [tmp_path], exe=str(tmp_path / "no-basedpyright"))
    assert run.status == "unavailable" and "cannot run" in run.why and got["m.port"].status == "unavailable"
    port = RunnerPort("g.R", "m.port", "R", None, "x = 1\n", [], [], [], 0.0, judge=got["m.port"])
    assert port.verdict == "unverified" and not port.ready
    assert [d.code for d in J.release_judge_lines(run)] == ["ONP4440"]
    clean = RunnerPort("g.R", "m.port", "R", None, "x = 1\n", [], [], [], 0.0, judge=J.Judgement("m.port"))
    assert clean.verdict == "yes" and clean.ready


def test_release_cli_without_basedpyright_says_so_once_and_exits_not_zero(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(J, "find_checker", lambda: None)
    monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(tmp_path / "cache"))
    rc = main(["port", "--release", str(FIX / "omni"), "--source", *map(str, SOURCES), "--history", "0.17.0",
               "-o", str(tmp_path / "out")])
    out = capsys.readouterr()
    report = json.loads((tmp_path / "out" / "port-report.json").read_text())
    assert rc == 1 and out.err.count("ONP4440") == 1 and "not installed" in out.err
    assert {r["ready_verdict"] for r in report["runners"]} == {"unverified"}
    assert report["judge"]["status"] == "unavailable"
    assert "0 of 2 module(s) ready" in out.out and "2 unverified (not judged)" in out.out


def test_no_judge_reads_unverified_and_the_report_has_the_judge_columns(tmp_path, capsys):
    rc = main(["port", "--release", str(FIX / "omni"), "--source", *map(str, SOURCES), "--history", "0.17.0",
               "-o", str(tmp_path / "out"), "--no-judge"])
    out = capsys.readouterr()
    report = json.loads((tmp_path / "out" / "port-report.json").read_text())
    md = (tmp_path / "out" / "port-report.md").read_text()
    assert "ONP4447" not in out.err and "unverified (not judged)" in out.out
    assert {r["ready_verdict"] for r in report["runners"]} == {"unverified"} and not report["summary"]["ready"]
    assert "judge: port / inherited / excluded" in md and "not judged (off)" in md and "ONP4447" in md
    assert rc in (0, 1) and rc == (1 if report["summary"]["conflicts"] or report["summary"]["lost_lines"] else 0)


@pytest.mark.slow
def test_a_judged_release_reports_its_counts_per_module(tmp_path, monkeypatch):
    monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(tmp_path / "cache"))
    res = port_release(FIX / "omni", sources=SOURCES, history=["0.17.0"], judge=True)
    assert res.judge_run.status == "judged" and all(r.judge.judged for r in res.runners)
    for r in res.runners:
        assert r.verdict == ("yes" if r.ready else "no")
        assert r.verdict == "no" or not r.judge.port
        cell = rf"\| {len(r.judge.port)} / {len(r.judge.inherited)} / {len(r.judge.excluded)} \|[^|\n]*\| {r.verdict} \|"
        assert re.search(cell, release_markdown(res))   # the judge's column, then the derived rules', then ready
    doc = res.to_json()
    assert all(set(r["judge"]) >= {"port", "inherited", "excluded", "exclusions"} for r in doc["runners"])


@pytest.mark.slow
def test_a_class_port_is_judged_with_its_sources_and_markers_are_not_judged(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(tmp_path / "cache"))
    specs = ["--class", "--gpu-base", f"{FIX / 'vllm'}:GPUModelRunner", "--gpu-omni", f"{FIX / 'omni'}:OmniGPUModelRunner",
             "--npu-base", f"{FIX / 'vllm_ascend'}:NPUModelRunner", "--force"]
    main(["port", *specs, "-o", str(tmp_path / "commented.py"), "--prefer", "comment"])
    err = capsys.readouterr().err
    assert "ONP4446" in err and "torch-npu-namespace" in err                  # judged: torch.npu excluded, named
    assert not any(f"ONP444{n} error" in err for n in range(5))               # the inputs' own errors inherited
    assert main(["port", *specs, "-o", str(tmp_path / "markers.py")]) == 1     # git-style markers: not Python
    err = capsys.readouterr().err
    assert "ONP4447" in err and "conflict markers" in err and "ONP4446" not in err
