"""The last unguarded inputs (issue 34, part 5): each case stops with one coded line naming the file (exit 2 or 3),
loses nothing, and has a fixture where the guard must fire and one where it must not."""
import ast
import re
import shutil
import struct
import zipfile
from pathlib import Path

import pytest

from cli_helpers import one_line, run

STACK = Path(__file__).parent / "fixtures" / "generalize" / "stack"


# --- 1. a runner indented with tabs ---------------------------------------------------------------------------------------
def _port_stack(omni: Path, out: Path):
    from omni_npu_port.port.locate import forget_trees
    from omni_npu_port.port.release import port_release
    forget_trees()
    return port_release(str(omni), target="vllm-ascend==0.18.0", sources=(str(STACK / "vllm"), str(STACK / "vllm_ascend")),
                        out=out, history=[])


def _tabbed(text: str, mixed: bool) -> str:
    "Every four spaces of indentation a tab, or (`mixed`) the first level a tab and the rest spaces: valid Python both."
    out = []
    for l in text.split("\n"):
        body = l.lstrip(" ")
        n = len(l) - len(body)
        out.append(("\t" + " " * (n - 4) if mixed else "\t" * (n // 4) + " " * (n % 4)) + body if n >= 4 else l)
    return "\n".join(out)


def test_a_tab_indented_runner_ports_as_its_spaces_version(tmp_path):
    "The fixture stack's omni runners with tabs (mixed with spaces, as Python allows) port to the same code as with spaces."
    from omni_npu_port.port.merge import keep_side
    spaced = shutil.copytree(STACK / "omni_new", tmp_path / "spaces", ignore=shutil.ignore_patterns("__pycache__"))
    f = spaced / "vllm_omni" / "worker" / "gpu_model_runner.py"   # a string whose lines have less margin than the def
    f.write_text(f.read_text().replace("    def _talker_mtp_forward(self, ids):\n", "    def _talker_mtp_forward(self, "
                                       "ids):\n        note = \"\"\"omni's note\nflush left\n\"\"\"\n"))
    omni = shutil.copytree(spaced, tmp_path / "tabs")
    for i, f in enumerate(sorted((omni / "vllm_omni" / "worker").glob("gpu*.py"))):
        t = _tabbed(f.read_text(), mixed=bool(i % 2))
        assert ast.dump(ast.parse(t)) == ast.dump(ast.parse(f.read_text())) and re.search(r"(?m)^\t", t)
        f.write_text(t)
    spaces, tabs = _port_stack(spaced, tmp_path / "a"), _port_stack(omni, tmp_path / "b")
    assert len(tabs.runners) == len(spaces.runners) == 4 and tabs.lost == spaces.lost == 0
    assert "flush left\n" in spaces.runners[0].code and "flush left\n" in tabs.runners[0].code
    for s, t in zip(spaces.runners, tabs.runners):
        assert s.path == t.path and "\t" not in re.sub(r"(?s)'''.*?'''|\"\"\".*?\"\"\"", "", t.code)
        assert ast.dump(ast.parse(keep_side(t.code))) == ast.dump(ast.parse(keep_side(s.code)))


def test_tabs_are_read_once_as_python_reads_them_and_spaces_are_left_alone(tmp_path):
    "A module read from a source comes back with spaces for tabs (the same tree); one without tabs comes back unchanged."
    from omni_npu_port.sources.readers import open_source, read_module_file
    pkg = tmp_path / "vllm_omni"; pkg.mkdir()
    tab = "class R:\n\tdef f(self):\n\t\ts = '''a\n\tb'''\n\t\treturn s\n"
    spaced = "class R:\n  def f(self):\n    return 1  # two spaces\n"
    (pkg / "__init__.py").write_text(""); (pkg / "tab.py").write_text(tab); (pkg / "spaced.py").write_text(spaced)
    tree = open_source(str(tmp_path))
    got = tree.module_source("vllm_omni.tab")
    assert not re.search(r"(?m)^\s*\t", got.replace("\tb'''", "")) and "\tb'''" in got   # a string keeps its tab
    assert ast.dump(tree.module_ast("vllm_omni.tab")) == ast.dump(ast.parse(tab))
    assert tree.module_source("vllm_omni.spaced") == spaced and read_module_file(pkg / "spaced.py")[0] == spaced
    assert "\n        return s" in read_module_file(pkg / "tab.py")[0]


# --- 2. a damaged torch-npu wheel in the cache ------------------------------------------------------------------------------
def _wheel(path: Path, members: dict, method=zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", method) as z:
        for n, t in members.items(): z.writestr(n, t)
    return path


def _patch_sizes(path: Path, member: str, size: int = None, flag: int = 0, method: int = None):
    "Rewrite what the zip states for `member` (local header and central directory): its size, a flag bit, its method."
    raw, name = bytearray(path.read_bytes()), member.encode()
    for sig, flag_at, method_at, size_at in ((b"PK\x03\x04", 6, 8, 22), (b"PK\x01\x02", 8, 10, 24)):
        i = raw.index(sig)
        while raw[i + (30 if sig == b"PK\x03\x04" else 46):][:len(name)] != name: i = raw.index(sig, i + 1)
        raw[i + flag_at] |= flag
        if method is not None: struct.pack_into("<H", raw, i + method_at, method)
        if size is not None: struct.pack_into("<I", raw, i + size_at, size)
    path.write_bytes(bytes(raw))


def _damaged_wheels(tmp: Path) -> dict:
    "One torch-npu wheel per kind of damage the issue names: what each must say."
    from omni_npu_port.sources.op_schemas import DOCS_PATH, YAML_PATH
    good = "- func: npu_rms_norm(Tensor self, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)\n"
    out = {}
    w = _wheel(tmp / "deflate.whl", {YAML_PATH: good * 200})
    raw = bytearray(w.read_bytes()); at = raw.index(b"PK\x03\x04") + 30 + len(YAML_PATH); raw[at:at + 16] = b"\xff" * 16
    w.write_bytes(bytes(raw)); out[w] = "damaged"
    w = _wheel(tmp / "method.whl", {YAML_PATH: good}); _patch_sizes(w, YAML_PATH, method=99); out[w] = "zip method 99"
    w = _wheel(tmp / "encrypted.whl", {YAML_PATH: good}); _patch_sizes(w, YAML_PATH, flag=1); out[w] = "encrypted"
    w = _wheel(tmp / "line.whl", {YAML_PATH: good + "- func: npu_swiglu(Tensor input, int 2dim=-1) -> Tensor\n"})
    out[w] = f"{YAML_PATH}:2: a schema that does not parse"
    w = _wheel(tmp / "docs.whl", {YAML_PATH: good, DOCS_PATH: "_add_torch_npu_docstr('npu_x', '''\n" + "[" * 5000})
    out[w] = f"{DOCS_PATH}"
    w = _wheel(tmp / "huge.whl", {YAML_PATH: good}); _patch_sizes(w, YAML_PATH, size=3 << 30); out[w] = "(as the zip states)"
    return out


def test_a_damaged_torch_npu_wheel_is_one_line_naming_wheel_and_member(tmp_path):
    ("Bad deflate data, an unknown method, the encrypted flag, a bad schema line, a bad docs module, a 3 GiB member: "
     "each is an input error naming the wheel and the member, with its code.")
    from omni_npu_port.core.errors import InputError
    from omni_npu_port.sources.op_schemas import YAML_PATH, read_op_schemas
    for wheel, said in _damaged_wheels(tmp_path).items():
        with pytest.raises(InputError) as e: read_op_schemas(wheel)
        msg = str(e.value)
        assert "\n" not in msg and str(wheel) in msg and said in msg and re.search(r"\(ONP901[01]\)", msg), msg
        assert "member torch_npu/" in msg, msg
    fine = _wheel(tmp_path / "fine.whl", {YAML_PATH: "- func: npu_swiglu(Tensor input, int dim=-1) -> Tensor\n"})
    assert read_op_schemas(fine) == {"npu_swiglu": "npu_swiglu(Tensor input, int dim=-1) -> Tensor"}   # must not fire


def test_doctor_ops_on_a_damaged_wheel_exits_3_with_one_line(tmp_path, monkeypatch):
    "`doctor --ops` with a damaged wheel in the cache: one coded line naming it, exit 3, never 'this is a bug'."
    from omni_npu_port.sources import op_schemas
    wheel = next(w for w in _damaged_wheels(tmp_path) if w.name == "encrypted.whl")
    monkeypatch.setattr(op_schemas, "torch_npu_wheel", lambda *a, **k: wheel)
    rc, _, err = run(["doctor", "--ops", "--json"])
    assert rc == 3 and "this is a bug" not in err, err
    one_line(err, "doctor", wheel, "encrypted", "ONP9010")


def test_a_zip_member_is_bounded_by_its_declared_size_and_as_it_inflates(tmp_path, monkeypatch):
    ("A deflate bomb (4 MB of zeros in a few KB) past the limit is refused before it inflates; one whose stated size "
     "lies small stops at that size (damaged); one within the limit reads whole.")
    from omni_npu_port.core.errors import InputError
    from omni_npu_port.sources.readers import LIMIT_ENV, read_member
    bomb = _wheel(tmp_path / "bomb.whl", {"a/x.yaml": b"\0" * (4 << 20)})
    assert bomb.stat().st_size < 64 << 10
    monkeypatch.setenv(LIMIT_ENV["MAX_MEMBER_BYTES"], "1")
    with zipfile.ZipFile(bomb) as z, pytest.raises(InputError, match=r"bomb.whl: member a/x.yaml is \d+ bytes uncompressed"):
        read_member(z, bomb, "a/x.yaml")
    _patch_sizes(bomb, "a/x.yaml", size=1000)   # it says 1000 bytes, it holds 4 MB
    with zipfile.ZipFile(bomb) as z, pytest.raises(InputError, match="damaged"): read_member(z, bomb, "a/x.yaml")
    monkeypatch.setenv(LIMIT_ENV["MAX_MEMBER_BYTES"], "8")
    ok = _wheel(tmp_path / "ok.whl", {"a/x.yaml": b"\0" * (4 << 20)})
    with zipfile.ZipFile(ok) as z: assert read_member(z, ok, "a/x.yaml") == b"\0" * (4 << 20)


# --- 3. rule files --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["nested", "dev-zero", "fifo", "yaml-nested"])
def test_a_rule_file_is_read_bounded_and_depth_safe(tmp_path, case):
    "5,000 nested brackets, a link to /dev/zero, a FIFO: one coded line naming the rule file (exit 2), no RecursionError."
    import os
    src = tmp_path / "runner.py"; src.write_text("import torch\ntorch.cuda.synchronize()\n")
    rules = tmp_path / ("r.yaml" if case.startswith("yaml") else "r.toml")
    if case == "nested": rules.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    elif case == "yaml-nested": rules.write_text("- " + "{a: " * 5000 + "1" + "}" * 5000 + "\n")
    elif case == "dev-zero": rules.symlink_to("/dev/zero")
    else: os.mkfifo(rules)
    rc, _, err = run(["translate", str(src), "--rules", str(rules), "--check"])
    assert rc == 2, err
    one_line(err, "translate", rules, "ONP9012")


def test_a_plain_rule_file_is_still_read(tmp_path):
    "The must-not-fire counterpart: a rule file of ordinary tables (brackets in strings and comments too) is used."
    from omni_npu_port.translate.rules import load_rule_file
    rules = tmp_path / "r.toml"
    rules.write_text('# [[[[[[ not nesting\n[[rule]]\nid = "dev.synchronize"\nnpu_symbol = "torch.npu.current_stream"\n'
                     'notes = "' + "[" * 100 + '"\n')
    assert load_rule_file(rules)[0]["npu_symbol"] == "torch.npu.current_stream"


# --- 7. audit takes NAME==VERSION ---------------------------------------------------------------------------------------------
def test_audit_takes_a_release_as_name_version_like_port_and_doctor(tmp_path, monkeypatch):
    "`audit --gpu vllm-omni==X`: fetched through the package cache (here a fixture stands in for what is fetched)."
    from omni_npu_port.port import release_inputs
    from omni_npu_port.port.locate import forget_trees
    fixture = Path(__file__).parent / "fixtures" / "audit" / "new_layout"
    asked = []
    monkeypatch.setattr(release_inputs, "fetch_package", lambda spec, cache_dir=None, **k: asked.append(spec) or fixture)
    forget_trees()
    rc, out, err = run(["audit", "--gpu", "vllm-omni==9.9.1", "--from", "vllm-omni==9.9.0", "--target", "0.12.0rc1"])
    forget_trees()
    # read as a release through the package cache; the fixture is no vllm to port on: an error line, no traceback
    assert asked[0] == "vllm-omni==9.9.1" and "not a version" not in err, (asked, err)
    assert rc in (2, 3) and err.splitlines()[-1].startswith("omni-npu-port audit: error: ") and "Traceback" not in err
    asked.clear()
    rc, _, err = run(["audit", "--gpu", "not-a-package==1.0", "--npu", str(fixture)])   # must not fire: still refused
    assert rc == 2 and not asked, err
    one_line(err, "audit", "not-a-package")


# --- 4. ruff settings: the input tree's own root only, a bad value a warning -----------------------------------------------
def test_format_ruff_reads_only_the_inputs_own_root_and_warns_on_a_bad_value(tmp_path):
    ("A parent's pyproject.toml (with a bad value, once an AttributeError) is not read; a bad value in the input's own "
     "folder is one ONP9013 warning naming file and key, and the port goes on; a good one is used.")
    from omni_npu_port.port import formatting
    tree = tmp_path / "parent" / "tree"; tree.mkdir(parents=True)
    f = tree / "runner.py"
    shutil.copy(Path(__file__).parent / "fixtures" / "port" / "ruffcfg" / "runner.py", f)
    (tmp_path / "parent" / "pyproject.toml").write_text('tool = "not a table"\n[project]\nname = "x"\n')
    args = ["port", "--gpu-base", f"{f}:GPUModelRunner._dummy_run", "--gpu-omni", f"{f}:OmniGPUModelRunner._dummy_run",
            "--npu-base", f"{f}:NPUModelRunner._dummy_run", "--format", "ruff"]
    formatting.ruff_config.cache_clear()
    rc, out, err = run(args)
    assert rc == 0 and "ONP9013" not in out + err and "this is a bug" not in err, err   # must not fire: a parent's file
    assert formatting.ruff_settings_at(str(f), None) == {}
    own = tree / "pyproject.toml"
    own.write_text('[tool.ruff]\nline-length = "wide"\n[tool.ruff.format]\nquote-style = "single"\n')
    formatting.ruff_config.cache_clear()
    rc, out, err = run(args)
    said = [l for l in (out + err).splitlines() if "ONP9013" in l]
    assert rc == 0 and len(said) == 1 and str(own) in said[0] and "tool.ruff.line-length" in said[0], out + err
    assert formatting.ruff_settings_at(str(f), None) == {"format": {"quote-style": "single"}}
    own.write_text("[tool.ruff]\nline-length = 60\n")
    formatting.ruff_config.cache_clear()
    assert formatting.ruff_settings_at(str(f), None) == {"line-length": 60}
    formatting.ruff_config.cache_clear()


# --- 5. translate's output sweep: age and owner, as the caches ---------------------------------------------------------------
DEAD = 2**22 + 4321   # no process has this id here (above the kernel's default pid_max): a dead run, or another host's


def _temp(folder: Path, name: str, tag: str, hours_old: float) -> Path:
    "A temp named as `core.io.write_atomic` names them, for file `name`, of process DEAD, `hours_old` hours old."
    import os
    import time
    t = folder / f".{name}.onp{DEAD}-{tag}.tmp"
    t.write_text("half a file")
    os.utime(t, (time.time() - hours_old * 3600,) * 2)
    return t


def test_translate_sweeps_only_an_old_temp_of_ours_never_a_fresh_one(tmp_path):
    "A fresh temp of a pid not running here (another host's writer appending) survives; an hour-old one of ours is swept."
    src = tmp_path / "src"; src.mkdir()
    (src / "runner.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    out = tmp_path / "out"; out.mkdir()
    fresh, old = _temp(out, "runner.py", "fresh_ab", 0.1), _temp(out, "runner.py", "old_abcd", 2)
    rc, _, err = run(["translate", str(src / "runner.py"), "-o", str(out)])
    assert rc in (0, 1), err
    assert (out / "runner.py").is_file() and fresh.exists() and not old.exists()


# --- 6. a port's outputs are one set ------------------------------------------------------------------------------------------
def test_a_port_interrupted_while_writing_leaves_nothing_and_a_rerun_succeeds(tmp_path, monkeypatch):
    "A failure between two writes (a full disk on the third file) leaves no module, no report, no temp; a rerun writes all."
    from omni_npu_port.core import io as core_io
    from omni_npu_port.core.errors import InputError
    from omni_npu_port.port.release import REPORT_JSON
    out, real, calls = tmp_path / "out", core_io._stage, []

    def full_disk(path, raw):
        calls.append(path)
        if len(calls) == 3: raise OSError(28, "No space left on device", str(path))
        return real(path, raw)
    monkeypatch.setattr(core_io, "_stage", full_disk)
    with pytest.raises(InputError, match=r"nothing of this set was written \(ONP9014\)"): _port_stack(STACK / "omni_new", out)
    assert len(calls) == 3 and not out.exists()   # no module without its report, no temp, no folder it made
    monkeypatch.undo()
    r = _port_stack(STACK / "omni_new", out)
    assert (out / REPORT_JSON).is_file() and all((out / x.path).is_file() for x in r.runners)
    assert not [p for p in out.rglob(".*") if p.is_file()]


def test_a_later_port_removes_only_its_own_stale_temps(tmp_path):
    ("What a killed port left (an hour-old temp for one of its files) goes with the next --force run; a fresh temp, a "
     "temp for a file the port does not write and a user's hidden file stay.")
    from omni_npu_port.port.release import REPORT_JSON, write_release
    out = tmp_path / "out"
    r = _port_stack(STACK / "omni_new", out)
    stale = _temp(out, REPORT_JSON, "stale_ab", 2)
    keep = [_temp(out, REPORT_JSON, "fresh_ab", 0.1), _temp(out, "notes.txt", "other_ab", 2)]
    (out / ".notes.tmp").write_text("the user's"); keep.append(out / ".notes.tmp")
    write_release(r, out, force=True)
    assert not stale.exists() and all(k.exists() for k in keep) and (out / REPORT_JSON).is_file()


def test_a_rename_that_fails_leaves_no_report_so_the_set_reads_as_unfinished(tmp_path, monkeypatch):
    ("A failure while the staged files are renamed in: no temp is left, the report (written last, its old copy removed "
     "first) is absent, and the error says the set is incomplete; without the failure the same call writes all.")
    import os
    from omni_npu_port.core import io as core_io
    from omni_npu_port.core.errors import InputError
    out = tmp_path / "out"; out.mkdir()
    (out / "report.json").write_text('{"old": true}')
    files = {out / "m" / "a.py": "a = 1\n", out / "m" / "b.py": "b = 2\n", out / "report.json": "{}"}
    real, calls = os.replace, []
    def second_fails(a, b):
        calls.append(b)
        if len(calls) == 2: raise OSError(5, "Input/output error")
        return real(a, b)
    monkeypatch.setattr(core_io.os, "replace", second_fails)
    with pytest.raises(InputError, match=r"the set is incomplete \(no report.json\).*ONP9014"):
        core_io.write_set(files, last=[out / "report.json"])
    monkeypatch.undo()
    assert not (out / "report.json").exists() and not [p for p in out.rglob(".*") if p.is_file()]
    core_io.write_set(files, last=[out / "report.json"])
    assert (out / "report.json").read_text() == "{}" and (out / "m" / "b.py").read_text() == "b = 2\n"
