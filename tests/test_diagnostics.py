"""One diagnostics registry: every ONP code raised is registered, every registered code is raised and documented."""
import json
from pathlib import Path

from omni_npu_port.core.diagnostics import SEVERITIES
from omni_npu_port.docs.codes import all_codes, raised_codes, registry_problems

ROOT = Path(__file__).resolve().parents[1]


def test_registry_is_whole():
    problems = registry_problems()
    assert not problems, "the diagnostics registry and the code disagree:\n" + "\n".join(problems)


def test_an_unregistered_code_is_caught(tmp_path):
    "The check is not vacuous: a module that raises a code nobody registered is named, with its line."
    pkg = tmp_path / "omni_npu_port"
    pkg.mkdir()
    (pkg / "rogue.py").write_text('x = 1\nd = Diagnostic("ONP7777", "never registered")\nc = Code("ONP7778", "n", "t", "info")\n')
    raised = raised_codes(pkg)
    assert raised == {"ONP7777": ["omni_npu_port/rogue.py:2"]}   # a registration is not a use
    assert any(p.startswith("ONP7777 is raised at omni_npu_port/rogue.py:2") for p in registry_problems(pkg))


def test_every_code_says_what_to_do_and_where_it_is_explained():
    codes = all_codes()
    assert len(codes) >= 40
    for c in codes.values():
        assert c.title and c.tool and c.severity in SEVERITIES, c
        assert c.action, f"{c.code} has no action (what a person does about it)"
        assert c.notebook and (ROOT / "nbs" / c.notebook).is_file(), f"{c.code}: notebook {c.notebook!r} not in nbs/"


# --- one record type: the audit's findings are Diagnostics (issue 23) ------------------------------------------------
def test_an_audit_finding_is_a_diagnostic_with_the_shared_fields():
    from omni_npu_port.core.diagnostics import Diagnostic
    from omni_npu_port.core.findings import format_findings
    from omni_npu_port.port.audit import Finding
    f = Finding("ONP4121", "drift", path="npu.py", line=7, cls="NPURunner", method="step", detail=["+ x()"])
    assert isinstance(f, Diagnostic) and f.where == "NPURunner.step" and f.severity == "warning"
    assert str(f) == "npu.py:7: ONP4121 warning: drift"                       # Diagnostic's own __str__
    assert Finding("ONP4125", "orphan", cls="C").location() == "C"              # no file: the class says where
    assert Finding("ONP4121", "x", level="info").severity == "info"             # a note for this occurrence only
    d = f.to_dict()
    assert d["where"] == "NPURunner.step" and d["title"] and d["detail"] == ["+ x()"] and d["cls"] == "NPURunner"
    assert json.loads(format_findings([f], "json"))[0]["where"] == "NPURunner.step"   # the writer takes it as it is


def test_audit_json_keeps_its_keys_and_gains_the_diagnostic_ones(tmp_path, capsys):
    from omni_npu_port.cli.main import main
    upd, stack = Path(__file__).parent / "fixtures" / "update", Path(__file__).parent / "fixtures" / "generalize" / "stack"
    argv = ["audit", "--gpu", str(upd / "omni_next"), "--npu", str(upd / "omni_prev"), "--from", str(upd / "omni_prev"),
            "--source", str(stack / "vllm"), str(stack / "vllm_ascend"), "--json"]
    assert main(argv) == 1
    rows = json.loads(capsys.readouterr().out)
    old = {"code", "cls", "method", "message", "line", "detail", "severity", "path"}   # the keys before issue 23
    assert rows and all(old <= set(r) for r in rows), rows
    r = next(r for r in rows if r["code"] == "ONP4120" and r["method"] == "_dummy_run")
    assert r["where"] == "OmniNPUModelRunner._dummy_run" and r["severity"] == "warning"
    npu = Path(r["path"]).read_text().splitlines()
    assert "self.talker_ids[:num_tokens].zero_()" in npu[r["line"] - 1]       # the copy's line the add follows