"""The port pipeline (issue 31, part 2): one context per port, one ordered list of registered class passes that
`port --class` and `port --release` both run, and port strategies registered by name.

Fixtures: tests/fixtures/release/ (a tiny vllm, vllm-ascend and vLLM-Omni checkout written for these tests), copied
and edited per test where a rule must fire."""
import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from omni_npu_port.cli.main import main
from omni_npu_port.core.diagnostics import REGISTRY
from omni_npu_port.port import pipeline, release_checks, update  # noqa: F401 (update registers ONP4017)
from omni_npu_port.port.context import PortContext
from omni_npu_port.port.locate import PortError
from omni_npu_port.port.method import STRATEGIES, PortOptions, finish_port, strategy
from omni_npu_port.port.release import (Placement, check_method, locate_base, method_chunks, open_release,
                                        release_runners)

FIX = Path(__file__).parent / "fixtures" / "release"
SOURCES = [FIX / "vllm", FIX / "vllm_ascend", FIX / "vllm_old"]
PASS = "def f(self):\n    pass\n"
UNBOUND = ("\n    def omni_stats(self):\n        torch.cuda.synchronize()\n"   # translated: ported, not inherited
           "        return omni_counter + 1\n")                                 # reads a name nothing binds


def _omni(tmp_path: Path, extra: str = "") -> Path:
    "A copy of the fixture checkout, `extra` appended to the omni GPU runner class."
    omni = shutil.copytree(FIX / "omni", tmp_path / "omni")
    f = omni / "vllm_omni" / "worker" / "gpu_model_runner.py"
    f.write_text(f.read_text() + extra)
    return omni


def _cli(args: list) -> tuple[int, dict]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()): rc = main(["port", *args])
    return rc, json.loads(out.getvalue())


def _both(tmp_path: Path, omni: Path, derived: list | None = None) -> tuple:
    ("The omni base runner ported by `port --release` and by `port --class`, the same inputs: (rc, code, codes) each "
     "(`derived`: each command's derived findings appended, as (code, line, message)).")
    rc_r, rel = _cli(["--release", str(omni), "--source", *map(str, SOURCES), "--history", "0.17.0",
                      "-o", str(tmp_path / "out"), "--no-judge", "--json"])
    runner = next(r for r in rel["runners"] if r["class"] == "OmniNPUModelRunner")
    written = (tmp_path / "out" / runner["path"]).read_text()
    rc_c, cls = _cli(["--class", "--gpu-base", f"{FIX / 'vllm'}:GPUModelRunner",
                      "--gpu-omni", f"{omni}:OmniGPUModelRunner", "--npu-base", f"{FIX / 'vllm_ascend'}:NPUModelRunner",
                      "--gpu-history", f"{FIX / 'vllm_old'}:GPUModelRunner",
                      "--class-name", "OmniNPUModelRunner", "--prefer", "comment", "--no-judge", "--json"])
    class_codes = [d["code"] for d in cls["diagnostics"] if d["code"] != "ONP4447"]   # --release says "not judged" once
    for one in ([runner["derived"], cls["stats"]["derived"]] if derived is not None else []):
        derived.append({k: [(d["code"], d["line"], d["message"]) for d in one[k]] for k in ("port", "inherited")})
    return (rc_r, written, [d["code"] for d in runner["diagnostics"]]), (rc_c, cls["code"], class_codes)


def test_a_class_ports_the_same_by_both_commands_where_a_later_pass_fires(tmp_path):
    ("A method reading a name nothing binds: the ready pass fires (ONP4421) by --release and by --class alike (--class "
     "ran no ready pass before the pipeline), the methods' text and the codes are the same, and both exit 1.")
    (rc_r, code_r, codes_r), (rc_c, code_c, codes_c) = _both(tmp_path, _omni(tmp_path, UNBOUND))
    assert "ONP4421" in codes_r and "ONP4421" in codes_c
    assert method_chunks(code_c, "OmniNPUModelRunner") == method_chunks(code_r, "OmniNPUModelRunner")
    assert code_c == code_r and codes_c == codes_r
    assert rc_r == rc_c == 1


def test_a_class_ports_the_same_by_both_commands_where_no_later_pass_fires(tmp_path):
    "The fixture as written: no ready finding by either command, the same module and codes, the class port clean."
    (rc_r, code_r, codes_r), (rc_c, code_c, codes_c) = _both(tmp_path, _omni(tmp_path))
    assert "ONP4421" not in codes_r + codes_c
    assert code_c == code_r and codes_c == codes_r and rc_c == 0


NCCL = ("\n    def omni_env(self):\n        torch.cuda.synchronize()\n        import os\n"   # translated: written
        "        os.environ[\"NCCL_DEBUG\"] = \"1\"\n        return os.environ.get(\"NCCL_ASYNC_ERROR_HANDLING\")\n")


def test_a_class_gets_the_same_derived_findings_by_both_commands(tmp_path):
    ("NCCL variables in a written method: the derived pass fires by --release and by --class alike (--class ran no "
     "derived check before it was a pass), the same findings at the same lines.")
    derived = []
    (_, code_r, _), (_, code_c, _) = _both(tmp_path, _omni(tmp_path, NCCL), derived)
    rel, cls = derived
    assert [c for c, _, _ in rel["inherited"]] == ["ONP2044", "ONP2044"] and rel == cls and code_c == code_r


def test_a_class_without_derived_findings_has_none_by_either_command(tmp_path):
    derived = []
    _both(tmp_path, _omni(tmp_path), derived)
    assert derived == [{"port": [], "inherited": []}] * 2          # ran by both (the key is there), found nothing


def test_the_passes_are_one_ordered_list_of_registered_objects():
    assert [p.name for p in pipeline.PASSES] == ["mro", "methods", "faithfulness", "reach", "records", "calls", "init",
                                                 "ready", "tuples", "siblings", "derived", "judge"]
    assert [p.name for p in pipeline.PASSES if p.batch] == ["siblings", "derived", "judge"]
    for p in pipeline.PASSES:
        assert p.applies and p.codes and all(c in REGISTRY for c in p.codes)
    assert "ONP4430" in pipeline.class_pass("reach").codes and "ONP4430" not in pipeline.class_pass("calls").codes
    with pytest.raises(PortError, match="no port pass 'recrods'.*records"): pipeline.class_pass("recrods")
    old = pipeline.class_pass("reach")
    try:   # registered again under its name: replaced where it stands, the order kept
        pipeline.register_pass(pipeline.ClassPass("reach", "a replacement", old.notebooks, old.run))
        assert [p.name for p in pipeline.PASSES].index("reach") == 3
        assert pipeline.class_pass("reach").applies == "a replacement"
    finally: pipeline.register_pass(old)


def test_a_batch_pass_that_waits_runs_beside_the_others_and_their_errors_are_raised(monkeypatch):
    import threading
    from omni_npu_port.port.judge import JudgeRun
    told, where = threading.Event(), {}
    def waiter(ports, ctx):   # first in order: run in order, it would wait for a pass that has not run yet
        where["waiter"] = told.wait(60)
        return JudgeRun(status="judged")
    def worker(ports, ctx):
        where["worker"] = threading.current_thread() is threading.main_thread()
        told.set()
    passes = [pipeline.ClassPass("waiter", "w", (), waiter, batch=True, waits=True),
              pipeline.ClassPass("worker", "x", (), worker, batch=True)]
    monkeypatch.setattr(pipeline, "PASSES", passes)
    monkeypatch.setattr(pipeline, "AST_THREADS", True)   # the threaded path, whatever this Python is
    assert pipeline.run_batch([], None).status == "judged" and where == {"waiter": True, "worker": True}
    def broken(ports, ctx): raise ValueError("the derived pass failed")
    told.clear()
    ran = []
    late = pipeline.ClassPass("late", "l", (), lambda ports, ctx: ran.append("late"), batch=True)
    monkeypatch.setattr(pipeline, "PASSES", [*passes, pipeline.ClassPass("broken", "b", (), broken, batch=True), late])
    with pytest.raises(ValueError, match="derived pass failed"): pipeline.run_batch([], None)
    assert where["waiter"] is True and ran == []   # the waiting pass finished first; none ran after the failure


def test_under_an_address_space_limit_the_batch_passes_run_in_order_here(monkeypatch):
    import threading
    order = []
    def mark(name):
        return lambda ports, ctx: order.append((name, threading.current_thread() is threading.main_thread()))
    monkeypatch.setattr(pipeline, "PASSES", [pipeline.ClassPass("w", "w", (), mark("w"), batch=True, waits=True),
                                             pipeline.ClassPass("x", "x", (), mark("x"), batch=True)])
    monkeypatch.setattr(pipeline, "AST_THREADS", True)   # the limit alone decides here, whatever this Python is
    monkeypatch.setattr(pipeline, "address_space_capped", lambda: True)   # a thread may not start there
    pipeline.run_batch([], None)
    assert order == [("w", True), ("x", True)]
    order.clear()
    monkeypatch.setattr(pipeline, "address_space_capped", lambda: False)
    pipeline.run_batch([], None)
    assert sorted(order) == [("w", False), ("x", True)]   # the waiting pass on a thread of its own


def test_no_batch_pass_waits_but_the_judge():
    assert [p.name for p in pipeline.PASSES if p.waits] == ["judge"]


def _bases():
    from omni_npu_port.port.runners import runner_bases
    gsym, nsym = runner_bases()[0][0], runner_bases()[1][0]
    return locate_base(str(FIX / "vllm"), gsym), locate_base(str(FIX / "vllm_ascend"), nsym)


def test_the_context_is_built_once_and_holds_what_module_caches_held():
    gb, nb = _bases()
    ctx = PortContext(gb, nb, PortOptions(prefer="comment"), extra=(str(FIX / "vllm"),))
    assert ctx.rules is ctx.rules and ctx.index is ctx.index
    assert not hasattr(release_checks, "_PORTED")   # the parents' MRO memo lives in the context now
    from omni_npu_port.port import reach, ready
    assert not any(hasattr(m, n) for m, n in ((reach, "_ENTRIES"), (ready, "_INDEX"), (ready, "_SHAPES")))
    assert ctx.entry_points is ctx.entry_points and ctx.entry_points   # the NPU worker's, found once per context
    assert isinstance(ctx.index, ready.ReadyIndex) and ctx.index.runner_modules
    g = release_runners(open_release(FIX / "omni")).gpu
    parents = [("OmniNPUModelRunner", "vllm_omni.worker.npu.npu_model_runner", f"{g[0].module}.{g[0].name}")]
    place = Placement("vllm_omni.worker.npu.npu_ar_model_runner", "NPUARModelRunner")
    args = (g[1], place, str(FIX / "omni"), gb, nb, [],
            (str(FIX / "vllm"),), "comment", parents)
    one = pipeline.port_runner(*args, ctx=ctx)
    assert len(ctx.ported_mros) == 1 and one.parent == "OmniNPUModelRunner"
    alone = pipeline.port_runner(*args)   # no context: one of its own, the same port
    assert alone.code == one.code and len(ctx.ported_mros) == 1
    with pytest.raises(PortError, match="give a PortOptions"): PortContext(gb, nb, {"prefer": "comment"})


def test_port_strategies_are_registered_and_an_unknown_style_is_an_error():
    assert set(STRATEGIES) == {"merge", "delta", "super-call", "super-inline", "super-kept", "npu-wraps",
                               "npu-wraps-inline", "omni-only", "update"}
    assert all(s.applies and all(c in REGISTRY for c in s.codes) for s in STRATEGIES.values())
    assert release_checks.REACHED == ("super-call", "super-kept") and strategy("merge").history
    with pytest.raises(PortError, match="unknown port style 'three-way'.*merge"): strategy("three-way")
    with pytest.raises(PortError, match="unknown port style"):
        check_method("f", "three-way", PASS, PASS, PASS)
    with pytest.raises(PortError, match="unknown port style"):
        finish_port(PASS, [], "three-way", "f", None, "markers", None, None)
    ok = finish_port(PASS, [], "omni-only", "f", None, "markers", None, None)   # a known style: ported
    assert ok.style == "omni-only" and ok.code.startswith("def f")


# conflicts as objects: one parser, one renderer (port/conflicts)
from omni_npu_port.port import merge as port_merge  # noqa: E402
from omni_npu_port.port.conflicts import Conflict, conflicts_in, resolve  # noqa: E402

BASE = "def step(self, a):\n    x = op(a)\n    return x\n"
NPU = "def step(self, a):\n    x = npu_op(a)\n    return x\n"
OMNI = "def step(self, a):\n    x = omni_op(a)\n    y = x\n    return x\n"


def _rendered(prefer: str) -> str:
    hunks = port_merge.merge_hunks(BASE, OMNI, NPU)
    return "\n".join(port_merge.render(hunks, prefer=prefer)[0]) + "\n"


@pytest.mark.parametrize("prefer", ["comment", "markers"])
def test_a_rendered_conflict_is_read_back_as_the_same_object_in_either_form(prefer):
    text = _rendered(prefer)
    (c,) = conflicts_in(text)                                  # fires: the merge wrote one conflict
    assert c.commented == (prefer == "comment") and c.live == ("npu" if prefer == "comment" else None)
    assert [l.strip() for l in c.side(0)] == ["x = npu_op(a)"]
    assert "x = omni_op(a)" in [l.strip() for l in c.side(1)]
    lines = text.splitlines()
    assert lines[c.at[0]:c.at[2] + 1] == c.lines()              # rendered once, by the object: the same lines
    assert port_merge.keep_side(text, 1) == resolve(text, 1) and "npu_op" not in resolve(text, 1)


def test_code_without_a_closed_conflict_has_none():
    assert conflicts_in(NPU) == []                               # must not fire: no markers
    open_only = "    # <<<<<<< ONP4001 conflict: NPU base (kept)\n    x = 1\n    # =======\n"
    assert conflicts_in(open_only) == [] and resolve(open_only) == open_only
    assert port_merge.uncomment_conflicts(NPU.rstrip("\n")) == NPU.rstrip("\n")


def test_uncommenting_keeps_each_marker_text_and_the_sides():
    c = Conflict.of(["    x = 1"], ["    x = 2", ""], commented=True, indent="    ")
    text = "def f(self):\n" + "\n".join(c.lines()) + "\n    return x"
    git = port_merge.uncomment_conflicts(text)
    assert git.splitlines()[1] == "<<<<<<< ONP4001 conflict: NPU base (kept)" and not git.endswith("\n")
    (g,) = conflicts_in(git)
    assert not g.commented and g.side(0) == c.side(0) and g.side(1) == c.side(1)
