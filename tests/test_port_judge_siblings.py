"""The judge reads what the port wrote (issues 31/32): a written module that imports a record from another written
module is checked against that written sibling, never the release's own module of the same dotted name (basedpyright
searches the project folder, where the ports are written at their package path, before `extraPaths`).
Fixtures written here: a tiny vllm_omni tree whose own AR module differs from the written one."""
from pathlib import Path
from textwrap import dedent

import pytest

from omni_npu_port.port import judge as J

pytestmark = pytest.mark.skipif(J.find_checker() is None, reason="basedpyright is not installed")

PKG = "vllm_omni.platforms.npu.worker"
AR, GEN = f"{PKG}.npu_ar_model_runner", f"{PKG}.npu_generation_model_runner"


def record(*fields: str) -> str:
    "An AR module whose state record has `fields` (none with a default)."
    return "from typing import NamedTuple\n\n\nclass ExecuteModelState(NamedTuple):\n" + "".join(
        f"    {f}: int\n" for f in fields)


def generation(imp: str) -> str:
    "A generation module that builds the record from two values, importing it by `imp`."
    return dedent(f"""\
        {imp}


        class NPUGenerationModelRunner:
            def execute_model(self, scheduler_output, logits):
                self.execute_model_state = ExecuteModelState(scheduler_output, logits)
        """)


ABSOLUTE, RELATIVE = f"from {AR} import ExecuteModelState", "from .npu_ar_model_runner import ExecuteModelState"


def omni_tree(root: Path, ar_text: str) -> Path:
    "The release's own omni source: packages with `__init__.py`, its AR module with `ar_text`."
    for i in range(1, len(PKG.split(".")) + 1):
        init = root.joinpath(*PKG.split(".")[:i], "__init__.py")
        init.parent.mkdir(parents=True, exist_ok=True)
        init.write_text("")
    root.joinpath(*AR.split(".")).with_suffix(".py").write_text(ar_text)
    root.joinpath(*GEN.split(".")).with_suffix(".py").write_text(generation(ABSOLUTE))
    return root


def port_errors(written: dict, omni: Path, warm: bool = False) -> dict:
    "Each written module's port errors (code, line, message) as the judge gives them."
    server = J.WarmJudge([str(omni.resolve())], omni, list(written), "") if warm else None
    try: got, run = J.judge_modules(written, {}, [omni], omni, warm=server)
    finally:
        if server is not None: server.close()
    assert run.status == "judged", run.why
    if warm: assert run.how == "server"
    return {m: [(d.code, d.line, d.message) for d in j.port] for m, j in got.items()}


@pytest.fixture(params=["command-line", "shared-server", "warm-server"])
def how(request, monkeypatch, tmp_path):
    monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(tmp_path / "cache"))
    if request.param == "command-line": monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_SERVER", "0")
    return request.param


@pytest.mark.parametrize("imp", [ABSOLUTE, RELATIVE])
def test_a_record_built_short_of_the_written_siblings_fields_is_flagged(tmp_path, how, imp):
    omni = omni_tree(tmp_path / "omni", record("scheduler_output", "logits"))   # the release's own: it binds
    written = {AR: record("scheduler_output", "logits", "multimodal_outputs"), GEN: generation(imp)}
    got = port_errors(written, omni, how == "warm-server")
    assert got[AR] == []
    assert [(c, line) for c, line, _ in got[GEN]] == [("ONP4442", 6)]
    assert '"multimodal_outputs"' in got[GEN][0][2]


@pytest.mark.parametrize("imp", [ABSOLUTE, RELATIVE])
def test_a_record_that_binds_to_the_written_sibling_is_not_flagged(tmp_path, how, imp):
    omni = omni_tree(tmp_path / "omni", record("scheduler_output", "logits", "multimodal_outputs"))   # would not bind
    written = {AR: record("scheduler_output", "logits"), GEN: generation(imp)}
    assert port_errors(written, omni, how == "warm-server") == {AR: [], GEN: []}


def test_without_a_written_sibling_the_releases_own_module_is_read(tmp_path, how):
    omni = omni_tree(tmp_path / "omni", record("scheduler_output", "logits", "multimodal_outputs"))
    got = port_errors({GEN: generation(ABSOLUTE)}, omni, how == "warm-server")
    assert [(c, line) for c, line, _ in got[GEN]] == [("ONP4442", 6)]
