"Derived rules in `port` and the audit (issue 33): each finding the port's or inherited, the NPU copy's own lines only."
import json
from pathlib import Path
from types import SimpleNamespace

from omni_npu_port.port import derived_check as dc
from omni_npu_port.port.derived_check import check_ports, class_lines, npu_copy_drift
from omni_npu_port.port.release import REPORT_JSON, REPORT_MD, port_release, write_release
from omni_npu_port.port.translation import rules_digest
from omni_npu_port.translate.derived import index_for
from omni_npu_port.translate.rules import compile_rules

FX = Path(__file__).parent / "fixtures" / "derived"
REL = Path(__file__).parent / "fixtures" / "release"
OMNI = 'import torch\n\ndef run(device):\n    if device.type == "cuda":\n        return torch.device("cuda", 0)\n'
WRITTEN = ('import os\nimport torch\n\ndef run(device):\n    if device.type == "cuda":\n'
           '        os.environ["NCCL_DEBUG"] = "1"\n        return torch.device("npu", 0)\n')


def ported(code=WRITTEN):
    return SimpleNamespace(code=code, path="omni/npu_runner.py", not_ready=[])


def test_a_finding_the_port_introduced_is_the_ports_and_one_an_input_has_is_inherited():
    [p] = ports = [ported()]
    assert check_ports(ports, FX / "vllm", FX / "ascend", [[OMNI]]) == []
    assert [(d.code, d.line) for d in p.derived.port] == [("ONP2044", 6)]   # the port wrote the NCCL variable
    assert [(d.code, d.line) for d in p.derived.inherited] == [("ONP2043", 5)]   # omni's own comparison, carried over
    assert p.derived.inherited[0].severity == "info" and p.derived.port[0].path == "omni/npu_runner.py"
    assert p.derived.cell() == "1 / 1" and p.not_ready == []   # the derived codes are a person's to-do, not "not ready"


def test_without_inputs_every_finding_is_the_ports():
    [p] = ports = [ported()]
    check_ports(ports, FX / "vllm", FX / "ascend", [[]])
    assert {d.code for d in p.derived.port} == {"ONP2043", "ONP2044"} and p.derived.inherited == []


def test_only_an_error_the_port_introduced_makes_a_module_not_ready(monkeypatch):
    real = dc._diag
    monkeypatch.setattr(dc, "_diag", lambda f, path, inherited=False:
                        (d := real(f, path, inherited), setattr(d, "level", d.level or "error"))[0])
    [p] = ports = [ported()]
    check_ports(ports, FX / "vllm", FX / "ascend", [[OMNI]])
    assert [d.code for d in p.not_ready] == ["ONP2044"]   # the inherited ONP2043 stays out


def test_sources_that_cannot_be_indexed_say_so_once():
    ports = [ported(), ported()]
    [d] = check_ports(ports, FX / "no-such-vllm", FX / "ascend", [[OMNI], [OMNI]])
    assert d.code == "ONP2055" and all(p.derived.cell() == "not run" for p in ports)


def test_the_release_port_reports_the_derived_column_and_json(tmp_path):
    res = port_release(REL / "omni", sources=[REL / "vllm", REL / "vllm_ascend", REL / "vllm_old"], history=["0.17.0"])
    assert res.runners and all(r.derived is not None and r.derived.skipped is None for r in res.runners)
    write_release(res, tmp_path)
    report = json.loads((tmp_path / REPORT_JSON).read_text())
    assert all({"port", "inherited"} <= set(r["derived"]) for r in report["runners"])
    assert "derived: port / inherited" in (tmp_path / REPORT_MD).read_text()


COPY = ('import os\nos.environ["NCCL_A"] = "1"\n\nclass NPURunner:\n    def f(self):\n'
        '        os.environ["NCCL_B"] = "1"\n        os.environ["NCCL_C"] = "1"\n')
BASE = 'import os\n\ndef g():\n    os.environ["NCCL_C"] = "1"\n'


def test_the_audit_sees_a_gpu_construct_the_npu_copy_still_has_at_its_own_lines():
    ix = index_for(FX / "vllm", FX / "ascend")
    [d] = npu_copy_drift(COPY, ix, class_lines(COPY, {"NPURunner"}), [BASE], "npu_runner.py")
    assert (d.code, d.line, d.path) == ("ONP2056", 6, "npu_runner.py") and "ONP2044" in d.message
    # outside the runner class (line 2) and a line the NPU base has too (line 7): not the copy's drift
    assert sorted(d.line for d in npu_copy_drift(COPY, ix)) == [2, 6, 7]
    assert npu_copy_drift(COPY.replace("NCCL_B", "HCCL_B"), ix, class_lines(COPY, {"NPURunner"}), [BASE]) == []


def test_a_cuda_body_the_target_runs_itself_is_no_drift_of_the_npu_copy():
    ix = index_for(FX / "vllm", FX / "ascend")
    copy = "from vllm.utils import cuda_stream_copy, cuda_seed\n"   # ONP2060 (info) and ONP2042 on one line
    [d] = npu_copy_drift(copy, ix)
    assert d.code == "ONP2056" and "ONP2042" in d.message and "cuda_seed" in d.message
    assert npu_copy_drift("from vllm.utils import cuda_stream_copy\n", ix) == []


def test_a_kept_translation_is_filed_apart_when_the_derived_rules_run():
    rules = compile_rules()
    off = rules_digest(rules)
    rules.derived = True
    assert rules_digest(rules) != off
    rules.derived = False
    assert rules_digest(rules) == off


def test_an_import_the_port_writes_anew_is_inherited_when_an_input_imports_that_name():
    omni = "from vllm.utils import (\n    cpu_seed,\n    cuda_seed,\n)\n"
    [p] = ports = [ported("from vllm.utils import cuda_seed\n")]
    check_ports(ports, FX / "vllm", FX / "ascend", [[omni]])
    assert p.derived.port == [] and [d.code for d in p.derived.inherited] == ["ONP2042"]
    [p] = ports = [ported("from vllm.utils import cuda_seed\n")]
    check_ports(ports, FX / "vllm", FX / "ascend", [["from vllm.utils import cpu_seed\n"]])
    assert [d.code for d in p.derived.port] == ["ONP2042"]   # the port brought the CUDA-only name in itself
