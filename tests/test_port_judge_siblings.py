"""The judge reads what the port wrote (issues 31/32): a written module that imports a record from another written
module is checked against that written sibling, never the release's own module of the same dotted name (basedpyright
searches the project folder, where the ports are written at their package path, before `extraPaths`).
Fixtures written here: a tiny vllm_omni tree whose own AR modules differ from the written ones. Each way the judge
runs (command line, shared server, warm server) judges every case in one run (issue 34: a run starts node)."""
from pathlib import Path
from textwrap import dedent

import pytest

from omni_npu_port.port import judge as J

pytestmark = pytest.mark.skipif(J.find_checker() is None, reason="basedpyright is not installed")

PKG = "vllm_omni.platforms.npu.worker"
FULL = ("scheduler_output", "logits", "multimodal_outputs")
# case -> (the fields of the release's own record, those of the written sibling's: None where no sibling is written)
CASES = {"short": (FULL[:2], FULL), "binds": (FULL, FULL[:2]), "alone": (FULL, None)}
IMPORTS = ("absolute", "relative")


def ar(case: str) -> str:
    "The AR module (its state record) of a case."
    return f"{PKG}.npu_ar_{case}_model_runner"


def gen(case: str, imp: str) -> str:
    "The generation module of a case that imports the record by `imp`."
    return f"{PKG}.npu_generation_{case}_{imp}_model_runner"


def record(*fields: str) -> str:
    "An AR module whose state record has `fields` (none with a default)."
    return "from typing import NamedTuple\n\n\nclass ExecuteModelState(NamedTuple):\n" + "".join(
        f"    {f}: int\n" for f in fields)


def generation(case: str, imp: str) -> str:
    "A generation module that builds the case's record from two values, importing it by `imp`."
    src = ar(case) if imp == "absolute" else "." + ar(case).rpartition(".")[2]
    return dedent(f"""\
        from {src} import ExecuteModelState


        class NPUGenerationModelRunner:
            def execute_model(self, scheduler_output, logits):
                self.execute_model_state = ExecuteModelState(scheduler_output, logits)
        """)


def omni_tree(root: Path) -> Path:
    "The release's own omni source: packages with `__init__.py`, each case's AR module and generation module."
    for i in range(1, len(PKG.split(".")) + 1):
        init = root.joinpath(*PKG.split(".")[:i], "__init__.py")
        init.parent.mkdir(parents=True, exist_ok=True)
        init.write_text("")
    for case, (own, _) in CASES.items():
        root.joinpath(*ar(case).split(".")).with_suffix(".py").write_text(record(*own))
        root.joinpath(*gen(case, "absolute").split(".")).with_suffix(".py").write_text(generation(case, "absolute"))
    return root


def written() -> dict:
    "The port's modules: each case's written sibling (where it has one) and its generation modules (by either import)."
    out = {ar(c): record(*fields) for c, (_, fields) in CASES.items() if fields}
    return out | {gen(c, imp): generation(c, imp) for c in CASES for imp in (IMPORTS if CASES[c][1] else IMPORTS[:1])}


def port_errors(written: dict, omni: Path, warm: bool = False) -> dict:
    "Each written module's port errors (code, line, message) as the judge gives them."
    server = J.WarmJudge([str(omni.resolve())], omni, list(written), "") if warm else None
    try: got, run = J.judge_modules(written, {}, [omni], omni, warm=server)
    finally:
        if server is not None: server.close()
    assert run.status == "judged", run.why
    if warm: assert run.how == "server"
    return {m: [(d.code, d.line, d.message) for d in j.port] for m, j in got.items()}


@pytest.fixture(scope="module", params=["command-line", "shared-server", "warm-server"])
def judged(request, tmp_path_factory):
    "Every case's modules judged in one run, the judge run the fixture's way."
    root = tmp_path_factory.mktemp("siblings")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(root / "cache"))
        if request.param == "command-line": mp.setenv("OMNI_NPU_PORT_JUDGE_SERVER", "0")
        return port_errors(written(), omni_tree(root / "omni"), request.param == "warm-server")


def test_a_record_built_short_of_the_written_siblings_fields_is_flagged(judged):
    assert judged[ar("short")] == []                       # the release's own record binds: the written one is read
    for imp in IMPORTS:
        got = judged[gen("short", imp)]
        assert [(c, line) for c, line, _ in got] == [("ONP4442", 6)], imp
        assert '"multimodal_outputs"' in got[0][2]


def test_a_record_that_binds_to_the_written_sibling_is_not_flagged(judged):
    assert {m: judged[m] for m in (ar("binds"), *(gen("binds", imp) for imp in IMPORTS))} == {
        ar("binds"): [], gen("binds", "absolute"): [], gen("binds", "relative"): []}   # the release's would not bind


def test_without_a_written_sibling_the_releases_own_module_is_read(judged):
    assert ar("alone") not in judged
    assert [(c, line) for c, line, _ in judged[gen("alone", "absolute")]] == [("ONP4442", 6)]
