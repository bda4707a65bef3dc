"""The written modules' checker errors kept by content (issue 31, speed): a warm port that writes the same texts
against the same archives' files reads them back (`how: kept`, the same findings) and starts no server; a changed
text, or a source given as a folder (whose content its name does not say), is checked again.
Fixtures written here, reusing test_port_judge's tiny vllm / vllm_ascend / vllm_omni tree."""
import os
import shutil
import threading
from textwrap import dedent

import pytest

from omni_npu_port.port import judge as J
from test_port_judge import PORT, tree  # noqa: F401  (the module-scoped fixture tree)

MOD = "vllm_omni.platforms.npu.worker.npu_model_runner"
NPU = ("vllm_ascend.worker.model_runner_v1", "NPUModelRunner")
GPU = "vllm_omni.worker.gpu_model_runner.OmniGPUModelRunner"
# test_port_judge's port without `import torch` (then an undefined name): keeping results needs no torch, and each of
# the basedpyright runs here then reads none of torch's own files (~1.0 of ~1.9 s CPU a run, issue 34)
PORT_NO_TORCH = PORT.replace("import torch\n", "", 1)


def _sources(root, named: bool):
    "The fixture's source folders: as `source_root` names an archive's files in the cache (NAME.SIZE.MTIME), or not."
    src, omni = (root / "cache" / "src.1.1", root / "cache" / "omni.2.2") if named else (root / "src", root / "omni")
    return src, omni


def _judge(root, src, omni, text=PORT_NO_TORCH):
    ins = [src / "vllm_ascend/worker/model_runner_v1.py", omni / "vllm_omni/worker/gpu_model_runner.py"]
    got, run = J.judge_modules({MOD: dedent(text)}, {MOD: ins}, [src, src, omni], omni, (str(ins[0]), NPU[1]))
    j = got[MOD]
    return run, [sorted((d.code, d.line, d.message) for d in x) for x in (j.port, j.inherited, j.excluded)]


@pytest.fixture(scope="module")
def runs(tree, tmp_path_factory):  # noqa: F811
    ("Archive-named sources: inputs checked, then the ports checked and kept, then read back, then a changed text; the "
     "same on folder sources.")
    root = tmp_path_factory.mktemp("kept")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(root / "cache"))
        mp.delenv("OMNI_NPU_PORT_JUDGE_SERVER", raising=False)   # the shared server where a run may use it
        shutil.copytree(tree / "src", root / "cache" / "src.1.1")
        shutil.copytree(tree / "omni", root / "cache" / "omni.2.2")
        shutil.copytree(tree / "src", root / "src"); shutil.copytree(tree / "omni", root / "omni")
        src, omni = _sources(root, True)
        got = [_judge(root, src, omni) for _ in range(3)]
        for f in (root / "cache" / "ports").glob("*.expect"): f.unlink()   # as after a change of this package's code
        got.append(_judge(root, src, omni))                                 # kept: it leaves the pointer again
        capped = J.address_space_capped
        mp.setattr(J, "address_space_capped", lambda: False)
        started = J.start_judge(True, src, src, omni, NPU, [MOD], [GPU])   # the last port of these inputs: kept
        mp.setattr(J, "address_space_capped", capped)
        changed = _judge(root, src, omni, PORT_NO_TORCH + "\nextra = undefined_too\n")
        folders = [_judge(root, *_sources(root, False)) for _ in range(2)]   # the second kept, were a folder kept
    return got, changed, started, folders


@pytest.mark.slow
def test_the_same_texts_on_the_same_archives_read_the_kept_results(runs):
    got, _, started, _ = runs
    assert [r.how for r, _ in got] == ["run", "kept", "kept", "kept"]   # inputs and ports checked and kept, then read
    assert got[2][1] == got[1][1] == got[0][1] and got[1][1][0]         # the same findings, some of them the port's
    assert got[2][0].checked == got[1][0].checked and got[2][0].inputs_kept == 2
    assert started is None                                              # no server where the results are likely kept


@pytest.mark.slow
def test_a_changed_text_or_a_folder_source_is_checked_again(runs):
    got, (changed, found), _, folders = runs
    assert changed.how == "run" and len(found[0]) == len(got[1][1][0]) + 1   # the new line's error is found
    assert [r.how for r, _ in folders] == ["run", "run"] and folders[1][1] == got[1][1]


def test_only_the_ports_own_files_are_pruned(tmp_path, monkeypatch):
    monkeypatch.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(tmp_path / "cache"))
    keys = [f"{i:032x}" for i in range(4)]
    for i, k in enumerate(keys):
        J.keep_ports(k, [])
        os.utime(tmp_path / "cache" / "ports" / f"{k}.json", ns=(i * 10**9, i * 10**9))   # oldest first
    (tmp_path / "cache" / "ports" / "notes.txt").write_text("someone's")
    monkeypatch.setattr(J, "KEPT_PORTS", 2)
    J.keep_ports("f" * 32, [])
    left = sorted(p.name for p in (tmp_path / "cache" / "ports").iterdir())
    assert left == [f"{keys[3]}.json", "f" * 32 + ".json", "notes.txt"]


@pytest.fixture(scope="module")
def early(tree, tmp_path_factory):  # noqa: F811
    "The server asked for a module as its runner is ported (before the others are written), then for all of them."
    root = tmp_path_factory.mktemp("early")
    other = "vllm_omni.platforms.npu.worker.npu_ar_model_runner"   # imports the first: asked only once it is written
    child = f"from {MOD} import OmniNPUModelRunner\n\nclass NPUAR(OmniNPUModelRunner):\n    def go(self):\n" \
            "        return self.nowhere_either\n"
    src, omni = tree / "src", tree / "omni"
    ins = [src / "vllm_ascend/worker/model_runner_v1.py", omni / "vllm_omni/worker/gpu_model_runner.py"]
    written = {MOD: dedent(PORT), other: child}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMNI_NPU_PORT_JUDGE_CACHE", str(root / "cache"))
        args = (written, {m: ins for m in written}, [src, src, omni], omni, (str(ins[0]), NPU[1]))
        want = J.judge_modules(*args)                      # one run (the inputs checked and kept)
        extra = [str(p.resolve()) for p in (src, src, omni)]
        warm = J.WarmJudge(extra, omni, list(written), J.warm_imports(ins))
        try:
            warm.ready.join(120)                           # up (`judge_early` never waits for it)
            asked = [J.judge_early(warm, other, child), J.judge_early(warm, MOD, written[MOD]),
                     J.judge_early(warm, other, child)]
            asked.append(len(warm.early))                  # the child asked as soon as its base was, then again
            got = J.judge_modules(*args, warm=warm)
        finally: warm.close()
    return want, got, asked


def _findings(judged):
    return {m: [sorted((d.code, d.line, d.message) for d in x) for x in (j.port, j.inherited, j.excluded)]
            for m, j in judged[0].items()}


@pytest.mark.slow
def test_a_module_asked_early_gets_the_findings_of_one_run(early):
    want, got, asked = early
    assert asked == [False, True, True, 3]     # the child waits for the module it imports; then both are asked
    assert got[1].how == "server" and _findings(got) == _findings(want) and _findings(want)[MOD][0]


def _job(i):
    return i * 10


def test_each_port_is_told_while_meanwhile_still_runs(monkeypatch, forks_alone):
    ("`port_runners(each=)`: each runner's port reaches `each` as its worker is done, before the parent's `meanwhile` "
     "ends (so the judge asks for a module while the derived index is still built), and every one before it returns.")
    if not forks_alone: return   # another thread runs here: it ran, and passed, in a child pytest
    from omni_npu_port.port import release as rel
    monkeypatch.setattr(rel, "port_runner", _job)   # the forked workers inherit it
    told, first = [], threading.Event()
    def each(port): told.append(port); first.set()
    def meanwhile(): assert first.wait(60)   # a port told before this ends
    assert rel.port_runners([(0,), (1,), (2,)], 2, meanwhile, each) == [0, 10, 20]
    assert sorted(told) == [0, 10, 20]
    told.clear()
    assert rel.port_runners([(0,), (1,)], 1, None, each) == [0, 10] and told == [0, 10]   # ported here: the same


def test_pruning_a_kept_folder_removes_only_this_users_oldest_files_of_its_own_names(tmp_path):
    import os
    import re
    from omni_npu_port.port.judge import prune_kept
    names = re.compile(r"[0-9a-f]{32}\.json")
    own = [tmp_path / f"{i:032x}.json" for i in range(4)]
    for i, f in enumerate(own):
        f.write_text("[]")
        os.utime(f, ns=(i * 10**9, i * 10**9))   # own[0] the oldest
    foreign = tmp_path / f"{9:032x}.json"
    foreign.write_text("[]")
    os.utime(foreign, ns=(0, 0))
    if hasattr(os, "getuid") and os.getuid() == 0: os.chown(foreign, 12345, 12345)   # another user's entry
    (tmp_path / "notes.json").write_text("mine")          # a name the tool never writes
    (tmp_path / f"{7:032x}.json").symlink_to(own[3])       # not a regular file
    prune_kept(tmp_path, names, 2)
    assert not own[0].exists() and not own[1].exists() and own[2].exists() and own[3].exists()
    assert (tmp_path / "notes.json").exists() and (tmp_path / f"{7:032x}.json").is_symlink()
    if hasattr(os, "getuid") and os.getuid() == 0: assert foreign.exists()
