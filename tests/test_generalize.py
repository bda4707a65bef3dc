"""benchmarks/generalize.py: its GPU-ism finder and MRO checks on small inputs, and its fixture part run quickly.

The benchmark's numbers (silent GPU-isms, refusals, unparsable outputs) are the benchmark's job; here: that it finds
what it claims to find, that its report has the structure it documents, and that every fixture class is exercised."""
import json
from pathlib import Path

import pytest
from project_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "generalize"


@pytest.fixture(scope="module")
def gen():
    return load_script("benchmarks/generalize.py")


def test_finder_resolves_imports_the_way_python_binds_them(gen):
    found = lambda name: {(h["symbol"].rsplit(".", 1)[1], h["via"]) for h in gen.find_gpuisms((FIX / "reexport" / name).read_text())}
    assert {("set_forward_context", "import"), ("set_forward_context", "name"), ("graph_capture", "name")} <= found("via_runner_module.py")
    assert {("set_forward_context", "attribute"), ("synchronize", "attribute"), ("Stream", "attribute"),
            ("graph_capture", "attribute"), ("current_stream", "attribute")} == found("module_alias.py")
    assert {("graph_capture", "star"), ("set_forward_context", "star"), ("CUDAGraphWrapper", "star")} == found("star_all.py")
    assert found("local_shadow.py") == {("synchronize", "attribute")}          # the module's own namesakes are not GPU-isms
    assert gen.find_gpuisms("import torch\n# torch.cuda.synchronize()\nx = 'torch.cuda.synchronize'\n") == []


def test_silent_means_no_diagnostic_and_no_comment_at_the_statement(gen):
    src = "import torch\n\n\ndef f():\n    torch.cuda.synchronize()\n"
    hits, silent = gen.silent_gpuisms(src, src, [])
    assert len(hits) == len(silent) == 1 and silent[0]["line"] == 5
    assert gen.silent_gpuisms(src, src, [{"line": 5, "code": "ONP9999"}])[1] == []      # a diagnostic on its line
    out = "import torch\n\n\ndef f():\n    # ONP2999 [x]: a person must act\n    #   here\n    torch.cuda.synchronize()\n"
    assert gen.silent_gpuisms(src, out, [])[1] == []                                    # an ONP comment right above
    far = "import torch\n# ONP2999 [x]\n\ndef f():\n    torch.cuda.synchronize()\n"
    assert len(gen.silent_gpuisms(src, far, [])[1]) == 1                                # not above its statement
    via = "# ONP2020 [fc.import]: re-exported\nfrom vllm.v1.worker.gpu_model_runner import set_forward_context\n\nwith set_forward_context(None, c):\n    pass\n"
    silent = gen.silent_gpuisms(via, via, [])[1]                                         # flagged at the import only
    assert [(h["line"], h["import_flagged"]) for h in silent] == [(4, True)]


def test_super_skips_follow_the_omni_mro(gen):
    idx = gen.class_index(FIX / "stack" / "vllm", FIX / "stack" / "vllm_ascend", FIX / "stack" / "omni_new")
    assert gen.next_definer("GPUDiffusionModelRunner", "_model_forward", idx) == "GPUGenerationModelRunner"
    assert gen.next_definer("GPUARModelRunner", "__init__", idx) == "OmniGPUModelRunner"
    bad = "class NPUARModelRunner(GPUARModelRunner, NPUModelRunner):\n    def __init__(self, c, d):\n        NPUModelRunner.__init__(self, c, d)\n"
    assert gen.super_skips(bad, "GPUARModelRunner", idx) == ["__init__: NPUModelRunner.__init__(self, ...) skips OmniGPUModelRunner.__init__"]
    assert gen.super_skips(bad.replace("NPUModelRunner.__init__(self, c, d)", "super().__init__(c, d)"), "GPUARModelRunner", idx) == []
    inherited = "class NPUARModelRunner(GPUARModelRunner, NPUModelRunner):\n    def load_model(self):\n        NPUModelRunner.load_model(self)\n"
    assert gen.super_skips(inherited, "GPUARModelRunner", idx) == []     # ported from OmniGPUModelRunner, whose super() is vllm's


def test_conflicts_and_parse_checks(gen):
    code = "def a(self):\n<<<<<<< NPU\n    x = 1\n=======\n    x = 2\n>>>>>>> omni\n\ndef b(self):\n    return 1\n"
    assert gen.conflicts_per_method(code) == {"a": 1, "b": 0}
    assert not gen.parses(code) and gen.parses("    def a(self):\n        return 1\n")
    assert not gen.parses("def a(self):\n    return f(x=1, x=2)\n")                   # parses, but does not compile
    found = gen.undefined_names("import os\n\nclass A:\n    def f(self, n):\n        return os.sep * num_tokens\n")
    if found is None: pytest.skip("ruff is not installed here: undefined names cannot be checked")   # said, never a pass
    assert found == ["5: Undefined name `num_tokens`"]
    assert gen.undefined_names("import os\n\nclass A:\n    def f(self, n):\n        return os.sep * n\n") == []


def call_here(args: list, timeout: float = 600) -> dict:
    ("A double of the benchmark's `call`: the command run by `cli.main` in this process, not in a fresh interpreter "
     "(whose start is most of a fixture command's cost); the same fields, refused as `call` says.")
    import contextlib
    import io
    import time
    from omni_npu_port.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err): rc = main(list(args))
    said = err.getvalue()
    return {"args": args, "rc": rc, "stdout": out.getvalue(), "stderr": said[-2000:],
            "seconds": time.perf_counter() - t0,
            "refused": rc not in (0, 1) or "Traceback (most recent call last)" in said}


def test_the_benchmark_runs_each_command_in_a_fresh_process(gen):
    "The benchmark's own `call` (the report test below runs its commands in this process): a fresh `omni-npu-port`."
    ok, bad = gen.call(["--version"]), gen.call(["translate", "--no-such-option"])
    assert ok["rc"] == 0 and not ok["refused"] and ok["stdout"].strip()
    assert bad["rc"] == 2 and bad["refused"] and "--no-such-option" in bad["stderr"]


def test_fixture_part_report_covers_every_class(gen, tmp_path, monkeypatch):
    out = tmp_path / "report.json"
    monkeypatch.setattr(gen, "call", call_here)   # one process: the commands' work, without an interpreter start each
    monkeypatch.chdir(ROOT)                       # where `call` runs them
    # nothing here reads a judge's verdict (tests/test_port_judge.py judges class ports) or a real release's port (the
    # default audit of a tree stating 0.18.0 ports the real vLLM-Omni release before it, a refusal never failed this)
    assert gen.main(["--fixtures", "--quick", "--no-judge", "--no-releases", "-j", "1", "--json", str(out)]) == 0
    fx = json.loads(out.read_text())["fixtures"]
    assert set(fx["per_class"]) == set(gen.CLASSES) and all(row["jobs"] >= 1 for row in fx["per_class"].values())
    kinds = {(r["class"], r["kind"]) for r in fx["results"]}
    assert {("reexport", "translate"), ("inherited", "port"), ("omni_only", "port"), ("hierarchy", "port --class"),
            ("hierarchy", "audit"), ("old_layout", "audit"), ("old_layout", "port --class"), ("versionless", "doctor")} <= kinds
    for key in ("silent_gpuisms", "refusals", "unparsable", "conflicts_per_method", "super_skips", "false_orphans"):
        assert key in fx["overall"]
    for key in ("silent_gpuisms", "refusals", "unparsable"):
        assert fx["overall"][key] == sum(row[key] for row in fx["per_class"].values())
    audits = [r for r in fx["results"] if r["kind"] == "audit"]   # on the fixture stack, from omni_old: each answers
    assert len(audits) == 2 and all(r["refusals"] == 0 and r["findings"] for r in audits), audits
    for r in fx["results"]:       # a refusal is counted once per error it records (a translate refusal may record none)
        assert isinstance(r["refusals"], int) and "errors" in r
        if r["kind"] != "translate": assert r["refusals"] == len(r["errors"]), r
