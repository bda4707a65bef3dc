"""`omni-npu-port port` and `omni-npu-port audit` on small GPU-base / omni-GPU / NPU-base triples (tests/fixtures/port)."""
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from omni_npu_port.cli.main import main
from omni_npu_port.core.diagnostics import REGISTRY
from omni_npu_port.port import locate
from omni_npu_port.port import translation
from omni_npu_port.port import merge
from omni_npu_port.port import supercalls
from omni_npu_port.port import formatting
from omni_npu_port.port import method as method_module
from omni_npu_port.port import classes as classes_module
from omni_npu_port.port import update as update_module
from omni_npu_port.port import score

FIX = Path(__file__).parent / "fixtures" / "port"


def triple(case: str, method: str):
    f = FIX / f"{case}.py"
    return [locate.locate(f"{f}:{cls}.{method}") for cls in ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")]


FENCE_CLOSE_RE = re.compile(r"^\s*#\s*-{10,}\s*$")


def fenced_blocks(code: str):
    "Lines between pairs of ----Omni-new---- fences (and `# Omni-new` marked lines): (first line, lines)."
    lines, out, open_at = code.splitlines(), [], None
    for i, l in enumerate(lines):
        if open_at is not None and (merge.FENCE_RE.match(l) or FENCE_CLOSE_RE.match(l)):
            out.append((open_at + 2, lines[open_at + 1: i])); open_at = None
        elif merge.FENCE_RE.match(l): open_at = i
        elif open_at is None and (l.rstrip().endswith(merge.INLINE_MARK)
                                  or (f"{merge.INLINE_MARK}:" in l and not l.strip().startswith("#"))):
            out.append((i + 1, [l]))
    return out


def codes(res):
    return [d.code for d in res.diagnostics]


def test_clean_merge_keeps_npu_changes_and_fences_omni_additions():
    res = method_module.port_method(*triple("clean", "_dummy_run"))
    assert "ONP4001" not in codes(res)
    ast.parse(res.code)
    assert "with_prefill=False" in res.code.splitlines()[0]                # the NPU signature
    assert "self.attn_state = AscendAttentionState.DecodeOnly" in res.code  # an NPU-only line
    assert "set_ascend_forward_context(" in res.code and "set_forward_context(" not in res.code.replace("set_ascend_forward_context(", "")
    blocks = ["\n".join(b) for _, b in fenced_blocks(res.code)]
    assert any("self.talker_mtp(" in b for b in blocks)                     # omni block fenced...
    assert any("extract_multimodal_outputs" in b for b in blocks)           # ...and the one-line addition marked
    talker = next(l for l in res.code.splitlines() if "self.talker_mtp(" in l)
    model = next(l for l in res.code.splitlines() if "outputs = self.model(" in l)
    assert merge.indent_of(talker) == merge.indent_of(model) + 4                        # sits inside the `if`, inside the `with`


def test_conflict_left_visible_with_code():
    res = method_module.port_method(*triple("conflict", "_dummy_run"))
    assert codes(res).count("ONP4001") == 1
    lines = res.code.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("<<<<<<<"))
    mid = lines.index("=======", start)
    end = next(i for i, l in enumerate(lines) if l.startswith(">>>>>>>"))
    assert "ONP4001" in lines[start]
    assert any("self._model_forward(num_tokens" in l for l in lines[start:mid])   # NPU side
    assert any("self._omni_kwargs()" in l for l in lines[mid:end])               # omni side
    d = next(d for d in res.diagnostics if d.code == "ONP4001")
    assert d.line == start + 1 and d.severity == "error"


def test_conflict_comment_style_keeps_the_code_parseable():
    res = method_module.port_method(*triple("conflict", "_dummy_run"), prefer="comment")
    ast.parse(res.code)
    assert "ONP4001" in res.code and "ONP4001" in codes(res)
    assert "outputs = self._model_forward(num_tokens, positions=positions)" in res.code
    assert "    # outputs = self.model(positions=positions, **self._omni_kwargs())" in res.code.splitlines()


@pytest.mark.parametrize("prefer, kept, dropped", [
    ("npu", "outputs = self._model_forward(num_tokens, positions=positions)", "self._omni_kwargs()"),
    ("omni", "self._omni_kwargs()", "self._model_forward(num_tokens, positions=positions)"),
])
def test_prefer_policy_resolves_conflicts_and_says_so(prefer, kept, dropped):
    res = method_module.port_method(*triple("conflict", "_dummy_run"), prefer=prefer)
    ast.parse(res.code)                                                     # no markers left
    assert "ONP4001" not in codes(res) and res.conflicts == 0
    assert kept in res.code and dropped not in res.code
    [d] = [d for d in res.diagnostics if d.code == "ONP4008"]
    assert f"--prefer {prefer}" in d.message and d.severity == "warning"
    note = res.code.splitlines()[d.line - 1]
    assert note.strip().startswith("# ONP4008") and f"--prefer {prefer}" in note
    if prefer == "omni":                                                     # the omni side is fenced as omni code
        assert any(kept in "\n".join(b) for _, b in fenced_blocks(res.code))


def test_prefer_rejects_unknown_policy():
    with pytest.raises(locate.PortError, match="markers, npu, omni"):
        method_module.port_method(*triple("conflict", "_dummy_run"), prefer="theirs")


@pytest.mark.parametrize("bad", ["git", "NPU", None])
def test_unlisted_policy_is_a_usage_error_everywhere(bad):
    from omni_npu_port.core.errors import UsageError
    for make in (lambda: method_module.PortOptions(prefer=bad), lambda: merge.render([], prefer=bad),
                 lambda: method_module.port_method(*triple("conflict", "_dummy_run"), prefer=bad)):
        with pytest.raises(UsageError, match="choose one of markers, npu, omni, comment"):
            make()


def test_port_options_and_keywords_give_the_same_port():
    conf, codes = triple("conflict", "_dummy_run"), set()
    for prefer in ("markers", "npu", "omni", "comment"):
        by_kw = method_module.port_method(*conf, prefer=prefer)
        by_opts = method_module.port_method(*conf, options=method_module.PortOptions(prefer=merge.Prefer(prefer)))
        assert by_opts.code == by_kw.code and [d.code for d in by_opts.diagnostics] == [d.code for d in by_kw.diagnostics]
        codes.add(by_opts.code)
    assert len(codes) == 4          # each policy reached the port through the options: four different ports


def test_port_options_and_a_differing_keyword_are_refused():
    conf = triple("conflict", "_dummy_run")
    with pytest.raises(locate.PortError, match="not both"):
        method_module.port_method(*conf, prefer="npu", options=method_module.PortOptions(prefer="omni"))
    with pytest.raises(locate.PortError, match="PortOptions"):
        method_module.port_method(*conf, options={"prefer": "npu"})


def test_each_entry_point_has_one_documented_default_policy():
    import inspect
    from omni_npu_port.port.release import port_release
    for entry, fn in (("method", method_module.port_method), ("class", classes_module.port_class), ("update", update_module.update_method),
                      ("release", port_release)):
        assert inspect.signature(fn).parameters["prefer"].default == method_module.DEFAULT_PREFER[entry], entry


def test_deleted_lines_stay_deleted_and_are_reported():
    res = method_module.port_method(*triple("deleted", "execute_model"))
    assert "self.debugger.step()" not in res.code
    assert "update_cos_sin(self.positions)" in res.code
    assert "ONP4002" in codes(res) and "ONP4001" not in codes(res)


def test_moved_block_lands_after_the_npu_edit():
    res = method_module.port_method(*triple("moved", "execute_model"))
    lines = [l.strip() for l in res.code.splitlines()]
    assert "ONP4001" not in codes(res)
    assert lines.count('logger.debug("batch %s", batch)') == 1
    assert lines.index("prepared = maybe_pad_for_npu(prepared)") < lines.index('logger.debug("batch %s", batch)')
    assert lines.index("out = self._finish(out)") < lines.index('logger.debug("batch %s", batch)')


def test_nested_function_addition_keeps_its_indentation():
    res = method_module.port_method(*triple("nested", "_dummy_run"))
    ast.parse(res.code)
    lines = res.code.splitlines()
    i = next(i for i, l in enumerate(lines) if "extract_multimodal_outputs" in l)
    assert merge.indent_of(lines[i]) == 8 and not lines[i].rstrip().endswith(merge.INLINE_MARK)   # a whole statement: fenced
    assert merge.FENCE_RE.match(lines[i - 1]) and merge.FENCE_RE.match(lines[i + 1]) and merge.indent_of(lines[i - 1]) == 8
    assert "self._model_forward(num_tokens, self.input_ids[:num_tokens])" in res.code


def test_super_extension_becomes_explicit_base_call():
    res = method_module.port_method(*triple("super_ext", "load_model"))
    assert res.style == "super-call"
    assert "NPUModelRunner.load_model(self, *args, **kwargs)" in res.code and "super()" not in res.code
    d = next(d for d in res.diagnostics if d.code == "ONP4003")
    assert d.record == "sig.explicit-base-call"
    from omni_npu_port.core.catalog import CATALOG
    assert CATALOG[d.record].id == "sig.explicit-base-call"
    # the translator ran in the module's import context: the omni step is in NPU form, its diagnostic points at it
    assert "self.talker_mtp = ACLGraphWrapper(talker_mtp, self.vllm_config)" in res.code and "CUDAGraphWrapper" not in res.code
    d = next(d for d in res.diagnostics if d.code == "ONP1003")
    assert d.record == "graph.wrapper-construct" and "ACLGraphWrapper(" in res.code.splitlines()[d.line - 1]
    assert "ONP2015" not in codes(res)                     # super() is replaced by the explicit call (ONP4003)


def test_super_extension_forced_call_passes_npu_only_parameters():
    res = method_module.port_method(*triple("super_ext", "_model_forward"), super_style="call")
    assert "NPUModelRunner._model_forward(self, num_tokens_padded=num_tokens_padded, input_ids=input_ids" in res.code
    assert res.code.splitlines()[0].startswith("def _model_forward(self, num_tokens_padded")


def test_super_extension_with_used_result_is_inlined():
    res = method_module.port_method(*triple("super_ext", "_model_forward"))
    assert res.style == "super-inline"
    fn = ast.parse(res.code).body[0]
    assert [a.arg for a in fn.args.args][:2] == ["self", "num_tokens_padded"]        # NPU signature adopted
    src = res.code
    assert "**extra" in src and not re.search(r"\bhidden_states\b", src)            # base result renamed to the omni name
    assert src.index("extra = self._build_model_kwargs_extra()") < src.index("model_output = self.model(")
    # the omni step sees what the GPU base returns; the NPU base's post-processing (all-gather) comes after it
    assert src.index("model_output = self.model(") < src.index("self._omni_last_model_output") \
        < src.index("self._all_gather_hidden_states_and_aux(model_output)") < src.index("return model_output")
    assert src.count("return model_output") == 1
    assert "ONP4009" in codes(res)


@pytest.mark.parametrize("fixture, old, new, gather", [
    ("super_ext", "hidden_states = self.model(", "hidden_states = self.other_model(", "self._all_gather_hidden_states_and_aux(model_output)"),
    ("super_dict", "partial(self.model,", "partial(self.other_model,", "self._all_gather(model_output)")],
    ids=["no GPU result statement", "result computed by another callee"])
def test_super_extension_without_the_gpu_result_statement_keeps_super_order(fixture, old, new, gather):
    # when the NPU base has no statement computing what the GPU base returns (through the GPU base's callee),
    # omni steps follow the whole base
    gb, go, nb = triple(fixture, "_model_forward")
    npu = nb.method_source.replace(old, new)
    assert npu != nb.method_source
    lines, diags = supercalls.port_super_inline(go.method_source, npu, gb.method_source)
    src = "\n".join(lines)
    assert src.index(gather) < src.index("self._omni_last_model_output")
    assert "ONP4009" not in [d.code for d in diags]


def test_class_mode_writes_a_module_with_imports_and_ported_overrides(tmp_path):
    f = FIX / "super_ext.py"
    locs = [locate.locate(f"{f}:{c}", need_method=False) for c in ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")]
    res = classes_module.port_class(*locs)
    mod = ast.parse(res.code)
    cls = next(n for n in mod.body if isinstance(n, ast.ClassDef))
    assert cls.name == "OmniNPUModelRunner" and [ast.unparse(b) for b in cls.bases] == ["OmniGPUModelRunner", "NPUModelRunner"]
    names = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    assert "_model_forward" in names                           # the omni signature cannot take NPU calls
    imports = {ast.unparse(n) for n in mod.body if isinstance(n, (ast.Import, ast.ImportFrom))}
    assert "from super_ext import NPUModelRunner" in imports and "from super_ext import OmniGPUModelRunner" in imports


def test_translation_needs_the_module_imports():
    src = "def sync(self):\n    torch.cuda.synchronize()\n"
    assert translation.translate_code(src, "vllm-ascend==0.18.0", "import torch\n")[0] == "def sync(self):\n    torch.npu.synchronize()\n"
    assert translation.translate_code(src, "vllm-ascend==0.18.0", "")[0] == src    # `torch` unresolved: nothing to rewrite
    new, [d] = translation.translate_code(src, "vllm-ascend==0.18.0", "import torch\n")
    assert (d.code, d.line, d.record, d.severity) == ("ONP1002", 2, "dev.synchronize", "info")


def test_unknown_ascend_release_uses_the_release_the_resolver_names():
    "One resolver (core.catalog.resolve_release): the nearest release of the same series, else the nearest older one; ONP4104 says so."
    assert translation.known_ascend("0.18.0") == "0.18.0"
    assert translation.known_ascend("0.15.5") == "0.15.0rc1"
    loc = _located("vllm_ascend", "0.15.5")
    assert translation.target_of(loc) == "vllm-ascend==0.15.0rc1"
    [d] = translation.target_check(loc, translation.rules_for(translation.target_of(loc)))
    assert d.code == "ONP4104" and "0.15.5" in d.message and "0.15.0rc1" in d.message
    assert translation.target_check(_located("vllm_ascend", "0.18.0"), translation.rules_for("vllm-ascend==0.18.0")) == []


def test_insertions_at_the_same_place_put_omni_first():
    z = merge.lines_of("a\nb\n")
    hunks = merge.refine_conflict(z, merge.lines_of("a\nOMNI\nb\n"), merge.lines_of("a\nNPU\nb\n"), lambda xs: xs)
    assert [l for h in hunks for l in h.lines] == ["a", "OMNI", "NPU", "b"]
    lines, diags = merge.render(hunks)
    [d] = diags
    assert d.code == "ONP4010" and d.severity == "warning"
    assert merge.FENCE_RE.match(lines[d.line - 1]) and lines[d.line] == "OMNI"     # a lone statement is fenced


def test_omni_statement_inside_an_npu_deletion_still_applies():
    base = 'def f(self):\n    """Doc.\n\n    x: the x.\n    """\n    y = 1\n    return y\n'
    omni = 'def f(self):\n    """Doc.\n\n    x: the x.\n    z: the z.\n    """\n    z = 2\n    y = 1\n    return y\n'
    npu = 'def f(self):\n    return y\n'           # deletes the docstring and `y = 1`, writes nothing there
    z, a, b = (merge.lines_of(c) for c in (base, omni, npu))
    hunks = merge.refine_conflict(z, a, b, lambda xs: xs)
    assert "conflict" not in [h.kind for h in hunks]     # the docstring edit yields to the NPU deletion
    out = [l for h in hunks for l in h.lines]
    assert out == ["def f(self):", "    z = 2", "    return y"]


def test_a_modified_region_splits_into_insertions_and_modifications():
    z = merge.lines_of("x = compute(a)\n")
    side = merge.lines_of("extra = prepare()\nx = compute(a, b)\n")
    ops = merge.split_replace(z, side, 0, 1, 0, 2)
    assert ops == [("insert", 0, 0, 0, 1), ("replace", 0, 1, 1, 2)]


def test_translator_check_keeps_only_reminders_not_yet_done():
    mod = "from vllm_ascend.compilation.acl_graph import ACLGraphWrapper\n"
    src = ("def _talker_mtp_forward(self, n):\n"
           "    mode, desc, *_ = self._determine_batch_execution_and_padding(num_tokens=n, num_reqs=n)\n"
           "    if isinstance(self.talker_mtp, ACLGraphWrapper):\n        return self.talker_mtp(desc)\n")
    rules = translation.rules_for("vllm-ascend==0.18.0")
    [d] = translation.translator_check(src, mod, rules)
    assert d.code == "ONP2014" and d.line == 2
    fixed = src.replace("num_reqs=n)", "num_reqs=n, force_uniform_decode=True)")
    assert translation.translator_check(fixed, mod, rules) == []


def run_port(args, capsys):
    rc = main(["port", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def spec(case, cls, m):
    return f"{FIX / case}.py:{cls}.{m}"


def test_cli_errors_list_close_matches(capsys):
    rc, _, err = run_port(["--gpu-base", spec("clean", "GPUModelRunner", "_dumy_run"), "--gpu-omni",
                           spec("clean", "OmniGPUModelRunner", "_dummy_run"), "--npu-base",
                           spec("clean", "NPUModelRunner", "_dummy_run")], capsys)
    assert rc == 2 and "_dummy_run" in err and "close matches" in err and "Traceback" not in err
    rc, _, err = run_port(["--gpu-base", spec("clean", "GPUModelRuner", "_dummy_run"), "--gpu-omni",
                           spec("clean", "OmniGPUModelRunner", "_dummy_run"), "--npu-base",
                           spec("clean", "NPUModelRunner", "_dummy_run")], capsys)
    assert rc == 2 and "GPUModelRunner" in err and err.count("\n") == 1


def test_cli_output_file_is_never_overwritten_without_force(tmp_path, capsys):
    out = tmp_path / "ported.py"
    args = ["--gpu-base", spec("clean", "GPUModelRunner", "_dummy_run"), "--gpu-omni",
            spec("clean", "OmniGPUModelRunner", "_dummy_run"), "--npu-base", spec("clean", "NPUModelRunner", "_dummy_run"),
            "-o", str(out)]
    assert run_port(args, capsys)[0] == 0
    first = out.read_text()
    assert "Omni-new" in first
    out.write_text("mine\n")
    rc, _, err = run_port(args, capsys)
    assert rc == 2 and "--force" in err and out.read_text() == "mine\n"
    assert run_port(args + ["--force"], capsys)[0] == 0 and out.read_text() == first
    assert not list(tmp_path.glob(".ported.py.*"))                     # no temporary file left behind


def test_cli_conflicts_exit_1_and_json(capsys):
    rc, out, _ = run_port(["--gpu-base", spec("conflict", "GPUModelRunner", "_dummy_run"), "--gpu-omni",
                           spec("conflict", "OmniGPUModelRunner", "_dummy_run"), "--npu-base",
                           spec("conflict", "NPUModelRunner", "_dummy_run"), "--json"], capsys)
    data = json.loads(out)
    assert rc == 1 and data["style"] == "merge" and any(d["code"] == "ONP4001" for d in data["diagnostics"])


def test_cli_prefer_resolves_and_reports(capsys):
    args = ["--gpu-base", spec("conflict", "GPUModelRunner", "_dummy_run"), "--gpu-omni",
            spec("conflict", "OmniGPUModelRunner", "_dummy_run"), "--npu-base", spec("conflict", "NPUModelRunner", "_dummy_run")]
    rc, out, err = run_port(args + ["--prefer", "npu"], capsys)
    assert rc == 0 and "<<<<<<<" not in out and "ONP4008" in out and "ONP4008 warning" in err
    rc = main(["port", *args, "--prefer", "theirs"])          # argparse: usage and the choices, exit 2
    assert rc == 2 and "markers" in capsys.readouterr().err


def _located(package, version):
    cls = ast.parse("class X:\n    pass\n").body[0]
    return locate.Located("x", package, version, "m", "", cls)


def test_pairing_warning_names_the_nearest_pairs_not_the_table():
    assert translation.pairing_check(_located("vllm", "0.18.0"), _located("vllm_ascend", "0.18.0")) == []
    [d] = translation.pairing_check(_located("vllm", "0.17.0"), _located("vllm_ascend", "0.18.0"))
    assert d.code == "ONP4101" and "pairs with vllm 0.18.0" in d.message
    assert "vllm-ascend 0.17.0rc1 ↔ vllm 0.17.0" in d.message   # the nearest pair to the vllm given
    assert d.message.count("↔") == 3 and "0.20.2rc1" not in d.message and len(d.message) < 300


def test_layout_only_differences_are_not_changes():
    base = "def f(self):\n    x = (\n        a.b(1, 2)\n    )\n    return x\n"
    other = "def f(self):\n    x = a.b(1, 2)\n    return x\n"
    assert merge.adopt_layout(base, other) == other
    changed = "def f(self):\n    x = a.b(1, 3)\n    return x\n"
    assert merge.adopt_layout(base, changed) == base


def test_edits_at_different_places_of_one_region_both_apply():
    z = merge.lines_of("a\nb\nc\nd\n")
    omni = merge.lines_of("a\nOMNI\nb\nc\nd\n")
    npu = merge.lines_of("a\nb\nc\nNPU\n")
    hunks = merge.refine_conflict(z, omni, npu, lambda xs: xs)
    assert "conflict" not in [h.kind for h in hunks]
    assert [l for h in hunks for l in h.lines] == ["a", "OMNI", "b", "c", "NPU"]


# --- audit: the update's diff, tested in tests/test_audit.py (issue 32) -------------------------------------


# --- real sources (cached releases; the port-quality benchmark measures the same) ---------------------------
CACHE = Path("~/.cache/omni-npu-port/pkgs").expanduser()


@pytest.mark.slow
def test_real_runner_class_port(release_source):
    vllm, ascend = release_source("vllm==0.16.0"), release_source("vllm-ascend==0.16.0rc1")
    omni = release_source("vllm-omni==0.16.0")
    res = classes_module.port_class(locate.locate(f"{vllm.origin}:GPUModelRunner", False), locate.locate(f"{omni.origin}:OmniGPUModelRunner", False),
                       locate.locate(f"{ascend.origin}:NPUModelRunner", False))   # its time: benchmarks/timings.py
    # the same overrides vLLM-Omni's hand-written OmniNPUModelRunner has
    assert set(res.stats["styles"]) == {"load_model", "_dummy_run", "_model_forward", "_talker_mtp_forward"}
    assert res.stats["styles"]["load_model"] == "super-call"


def test_lone_line_inside_brackets_is_marked_inline_a_lone_statement_is_fenced():
    res = method_module.port_method(*triple("marks", "_model_forward"))
    ast.parse(res.code)
    lines = res.code.splitlines()
    arg = next(l for l in lines if "**self._extra_kwargs()" in l)
    assert arg.rstrip().endswith(merge.INLINE_MARK)                              # a fragment of the call: inline mark
    i = next(i for i, l in enumerate(lines) if "self._last_output = model_output" in l)
    assert not lines[i].rstrip().endswith(merge.INLINE_MARK)
    assert merge.FENCE_RE.match(lines[i - 1]) and merge.FENCE_RE.match(lines[i + 1])  # a whole statement: fenced


def test_a_line_both_sides_add_at_different_places_is_kept_once():
    res = method_module.port_method(*triple("shared_add", "_dummy_run"))
    ast.parse(res.code)                                                      # no duplicate parameter
    lines = [l.strip() for l in res.code.splitlines()]
    assert lines.count("num_loras: int = 0,") == 1
    assert lines.index("num_loras: int = 0,") > lines.index("is_capturing: bool = False,")   # the NPU base's place
    assert any(l.startswith("use_lora: bool | None = None,") for l in lines)                  # the omni change applies
    assert "ONP4011" in codes(res) and "ONP4001" not in codes(res)


def test_stale_omni_side_takes_the_npu_side_given_the_older_base():
    args = triple("stale", "_dummy_run")
    assert "ONP4001" in codes(method_module.port_method(*args))                          # without history: a conflict
    old = locate.locate(f"{FIX / 'stale_old.py'}:GPUModelRunner._dummy_run")
    res = method_module.port_method(*args, history=[old])
    ast.parse(res.code)
    assert "ONP4001" not in codes(res) and "ONP4012" in codes(res)
    assert "if self.drafter:" in res.code and "use_eagle()" not in res.code  # the NPU side is kept...
    blocks = ["\n".join(b) for _, b in fenced_blocks(res.code)]
    assert any("extract_multimodal_outputs" in b for b in blocks)           # ...and omni's real step still applies
    # an older base that does not hold the omni side changes nothing
    other = locate.locate(f"{FIX / 'clean.py'}:GPUModelRunner._dummy_run")
    assert "ONP4001" in codes(method_module.port_method(*args, history=[other]))


def test_cli_gpu_history(capsys):
    f, old = FIX / "stale.py", FIX / "stale_old.py"
    rc = main(["port"] + ["--gpu-base", f"{f}:GPUModelRunner._dummy_run", "--gpu-omni", f"{f}:OmniGPUModelRunner._dummy_run",
                 "--npu-base", f"{f}:NPUModelRunner._dummy_run", "--gpu-history", f"{old}:GPUModelRunner._dummy_run"])
    out, err = capsys.readouterr()
    assert rc == 0 and "<<<<<<<" not in out and "ONP4012" in err


def test_class_mode_passes_history_to_each_method():
    cls = lambda f, c: locate.locate(f"{FIX / f}:{c}", False)
    args = (cls("stale.py", "GPUModelRunner"), cls("stale.py", "OmniGPUModelRunner"), cls("stale.py", "NPUModelRunner"))
    assert "ONP4001" in codes(classes_module.port_class(*args))
    res = classes_module.port_class(*args, history=[cls("stale_old.py", "GPUModelRunner")])
    assert "ONP4001" not in codes(res) and "ONP4012" in codes(res)
    ast.parse(res.code)


# --- port-quality gaps found on vLLM-Omni 0.18.0+ ------------------------------------------------------------------

def test_a_comment_is_laid_out_only_as_the_same_comment():
    # every comment parses to nothing: compared by its words, one comment never takes another's text
    src = "def f():\n    # keep this\n    x = 1\n"
    assert merge.adopt_layout(src, "def f():\n    # other words\n    x = 1\n") == src
    assert merge.adopt_layout(src, "def f():\n    #   keep   this\n    x = 1\n") == "def f():\n    #   keep   this\n    x = 1\n"


def test_adopted_layout_keeps_the_statement_depth_so_the_result_parses():
    deep = "def f(self):\n    with g():\n        x = (\n            a.b(1, 2)\n        )\n    return x\n"
    flat = "def f(self):\n    x = a.b(1, 2)\n    return x\n"
    out = merge.adopt_layout(deep, flat)
    assert out == "def f(self):\n    with g():\n        x = a.b(1, 2)\n    return x\n"
    ast.parse(out)
    assert merge.logical_units(out)                     # a second adoption (omni onto this base) can still read it


def test_the_same_change_on_both_sides_is_no_conflict():
    res = method_module.port_method(*triple("same_change", "_dummy_run"))
    assert res.conflicts == 0 and "ONP4006" not in codes(res)
    ast.parse(res.code)
    lines = [l.strip() for l in res.code.splitlines()]
    assert lines.count("assert mode is None or mode.valid_modes()") == 1         # written once, not as omni
    blocks = ["\n".join(b) for _, b in fenced_blocks(res.code)]
    assert not any("valid_modes" in b for b in blocks)
    assert any("lora = self.num_loras > 0" in b for b in blocks)                # the omni statement survives the NPU rewrite
    assert any("lora=lora" in b for b in blocks)
    # the base comment the omni copy kept is not an omni edit, and the NPU base's unwrapped statement is not either
    assert "# The dummy run covers the LM only." not in res.code
    assert not any("self.profile_len" in b for b in blocks)
    assert "with self.input_prep()" not in res.code
    # omni lines sit at the depth of the code around them in the NPU base
    assert next(l for l in res.code.splitlines() if "lora = " in l).startswith("    lora")
    assert next(l for l in res.code.splitlines() if "lora=lora" in l).startswith("    hidden_states")


def test_an_npu_rewrite_is_cut_around_an_omni_statement():
    z = merge.lines_of('"""Doc."""\nif c:\n    return None\nassert old()\n')
    omni = merge.lines_of('"""Doc."""\nz = 2\nif c:\n    return None\nassert old()\n')
    npu = merge.lines_of("# npu note\nassert new()\n")                             # replaces everything, writes its own lines
    hunks = merge.refine_conflict(z, omni, npu, lambda xs: xs)
    assert "conflict" not in [h.kind for h in hunks]
    out = [l for h in hunks for l in h.lines]
    assert "z = 2" in out and "assert new()" in out and "assert old()" not in out


def test_super_extension_inlines_a_base_that_forwards_kwargs_through_a_dict():
    res = method_module.port_method(*triple("super_dict", "_model_forward"))
    assert res.style == "super-inline"
    src = res.code
    ast.parse(src)
    fn = ast.parse(src).body[0]
    d = next(n for n in ast.walk(fn) if isinstance(n, ast.Dict))
    assert [ast.unparse(v) for k, v in zip(d.keys, d.values) if k is None] == ["model_kwargs", "extra"]
    assert {ast.unparse(k): ast.unparse(v) for k, v in zip(d.keys, d.values) if k is not None}["'step'"] == "1"
    assert "**extra,  # Omni-new" in src
    # the result is computed in both branches of an `if` through an alias of the model: the omni step follows
    # that statement, before the NPU base's all-gather; the shared `return` stays outside the fence
    assert src.index("model_output = run_model()") < src.index("self._omni_last_model_output") \
        < src.index("self._all_gather(model_output)")
    assert "ONP4009" in codes(res)
    assert src.rstrip().splitlines()[-1].strip() == "return model_output"
    assert all("return" not in "\n".join(b) for _, b in fenced_blocks(src))


def test_an_omni_edit_the_npu_rewrite_also_made_is_no_conflict():
    z = merge.lines_of("doc()\nassert (\n    m.is_valid()\n)\n")
    omni = merge.lines_of("doc()\nassert m.valid()\n")
    npu = merge.lines_of("# note\nassert m.valid()\n")                             # rewrote all four lines, the assert as omni did
    hunks = merge.refine_conflict(z, omni, npu, lambda xs: xs)
    assert {h.kind for h in hunks} <= {"npu", "unchanged"}
    assert [l for h in hunks for l in h.lines] == ["# note", "assert m.valid()"]
    # an omni edit the NPU side did not make still conflicts
    other = merge.refine_conflict(z, merge.lines_of("doc()\nassert m.other()\n"), npu, lambda xs: xs)
    assert "conflict" in [h.kind for h in other]


def test_an_omni_call_added_after_a_like_call_is_fenced_whole():
    # difflib may align the inserted call one line off (`a,` / `)` / `h(`): the insertion slides until it is whole
    base = "def f(self):\n    x = g(\n        a,\n    )\n    y = 1\n    z = 2\n    return x\n"
    omni = "def f(self):\n    x = g(\n        a,\n    )\n    h(\n        a,\n    )\n    y = 1\n    z = 2\n    return x\n"
    npu = base.replace("return x", "return x + 1")
    hunks = merge.merge_hunks(base, omni, npu)
    [ins] = [h for h in hunks if h.kind == "omni"]
    assert [l.strip() for l in ins.lines] == ["h(", "a,", ")"]
    assert [l for h in hunks for l in h.lines] == omni.replace("return x", "return x + 1").splitlines()
    lines, _ = merge.render(hunks)
    ast.parse("\n".join(lines))


def test_an_omni_edit_of_an_assignment_the_npu_base_deleted_is_moot_when_nothing_reads_it():
    base = "def f(self):\n    h = self.run()\n    idx = pick(h).to(self.device)\n    return h, h[idx]\n"
    omni = "def f(self):\n    h = self.run()\n    idx = pick(h).to(h.device)\n    return h, h[idx]\n"
    npu = "def f(self):\n    h = self.run()\n    self.finish()\n    return h, h\n"
    res = merge.merge_hunks(base, omni, npu)
    assert "conflict" not in [h.kind for h in res]
    assert [h.code for h in res if h.note] == ["ONP4013"]
    assert [l for h in res for l in h.lines] == npu.splitlines()
    # the same edit stays a conflict when a kept line still reads the name
    npu2 = "def f(self):\n    h = self.run()\n    self.finish(idx)\n    return h, h\n"
    assert "conflict" in [h.kind for h in merge.merge_hunks(base, omni, npu2)]


def test_real_runner_0_18_merges_dummy_run_and_inlines_model_forward(release_source):
    # vLLM-Omni 0.18.0 declares vllm 0.18.0 with vllm-ascend's releases/v0.18.0 branch
    vllm, ascend = release_source("vllm==0.18.0"), release_source("vllm-ascend==0.18.0")
    omni = release_source("vllm-omni==0.18.0")
    spec = lambda t, c, m: locate.locate(f"{t.origin}{'/vllm/v1/worker/gpu_model_runner.py' if t is vllm else ''}:{c}.{m}")
    trip = lambda m: (spec(vllm, "GPUModelRunner", m), spec(omni, "OmniGPUModelRunner", m), spec(ascend, "NPUModelRunner", m))
    dr = method_module.port_method(*trip("_dummy_run"))
    assert dr.conflicts == 0
    ast.parse(dr.code)
    blocks = ["\n".join(b) for _, b in fenced_blocks(dr.code)]
    assert any("extract_multimodal_outputs" in b for b in blocks)
    assert not any("valid_runtime_modes" in b for b in blocks)           # the change both sides made is not omni's
    mf = method_module.port_method(*trip("_model_forward"))
    assert mf.style == "super-inline" and "ONP4009" in codes(mf)
    assert mf.code.index("self._omni_last_model_output") < mf.code.index("self._all_gather_hidden_states_and_aux")


# --- --format ruff -----------------------------------------------------------------------------------------------

RUFFCFG = FIX / "ruffcfg" / "runner.py"


def ruff_triple(method="_dummy_run"):
    return [locate.locate(f"{RUFFCFG}:{cls}.{method}") for cls in ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")]


def test_format_reads_the_line_length_and_format_table_of_the_source(tmp_path):
    ll, settings = formatting.format_options(ruff_triple()[1])
    assert ll == 60 and settings["format"]["quote-style"] == "single"
    assert formatting.format_options(ruff_triple()[1], 100)[0] == 100                  # --line-length wins
    # an sdist: its top-level pyproject.toml; a wheel has none -> 120
    import io, tarfile
    sdist = tmp_path / "vllm_omni-9.9.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        for name, text in [("vllm_omni-9.9/pyproject.toml", "[tool.ruff]\nline-length = 99\n"),
                           ("vllm_omni-9.9/vllm_omni/__init__.py", "")]:
            data = text.encode(); ti = tarfile.TarInfo(name); ti.size = len(data); tf.addfile(ti, io.BytesIO(data))
    assert formatting.ruff_settings_at(str(sdist), "sdist") == {"line-length": 99}
    assert formatting.ruff_settings_at(str(sdist), "wheel") == {}


def test_format_ruff_rewraps_keeps_meaning_fences_and_marks():
    plain = method_module.port_method(*ruff_triple())
    res = method_module.port_method(*ruff_triple(), format="ruff")
    assert res.code != plain.code and "ONP4014" not in codes(res)
    assert ast.dump(ast.parse(res.code)) == ast.dump(ast.parse(plain.code))     # same meaning
    assert res.code.count(merge.FENCE_TEXT) == plain.code.count(merge.FENCE_TEXT) == 2
    # formatted as a class member: every line fits in 60 columns once indented by the class (comments aside)
    assert all(len(l) + 4 <= 60 for l in res.code.splitlines() if not l.lstrip().startswith("#"))
    assert "'talker'" in res.code                                               # the source's quote style
    wide = method_module.port_method(*ruff_triple(), format="ruff", line_length=120)
    assert "num_reqs = min(num_tokens, self.max_num_reqs)" in wide.code and len(wide.code.splitlines()) < len(res.code.splitlines())


def test_format_keeps_conflict_markers_and_moves_diagnostics_along():
    plain = method_module.port_method(*triple("conflict", "_dummy_run"))
    res = method_module.port_method(*triple("conflict", "_dummy_run"), format="ruff", line_length=30)
    assert "ONP4014" not in codes(res) and res.code != plain.code
    start = lambda code: next(l for l in code.splitlines() if l.startswith("<<<<<<<"))
    assert start(res.code) == start(plain.code)
    side = lambda code: code.split("=======\n")[1].split(">>>>>>>")[0]
    assert side(res.code) == side(plain.code)                                   # the omni side comes back as it was
    d = next(d for d in res.diagnostics if d.code == "ONP4001")
    assert res.code.splitlines()[d.line - 1].startswith("<<<<<<<")
    for d0, d1 in zip(plain.diagnostics, res.diagnostics):                     # every diagnostic still on its statement
        if d0.line and d0.code.startswith("ONP1"):
            key = lambda l: re.sub(r"\W", "", l)
            assert key(plain.code.splitlines()[d0.line - 1])[:12] in key("".join(res.code.splitlines()[d1.line - 1: d1.line + 3]))


def _fake_ruff(tmp_path, body: str) -> str:
    "A test double for the ruff executable: a script reading stdin and printing `body`'s transformation of it."
    exe = tmp_path / "ruff"
    exe.write_text(f"#!{sys.executable}\nimport sys\nsrc = sys.stdin.read()\n{body}\n")
    exe.chmod(0o755)
    return str(exe)


@pytest.mark.parametrize("body, why", [
    ("sys.stdout.write(src.replace('outputs', 'outs'))", "syntax tree"),
    ("sys.stdout.write(src.replace('Omni-new', 'Omni-old'))", "comments"),
    ("sys.exit(2)", "ruff format failed"),
])
def test_format_that_would_change_the_code_is_not_applied(tmp_path, monkeypatch, body, why):
    monkeypatch.setattr(formatting, "ruff_bin", lambda: _fake_ruff(tmp_path, body))
    plain = method_module.port_method(*ruff_triple())
    res = method_module.port_method(*ruff_triple(), format="ruff")
    assert res.code == plain.code
    [d] = [d for d in res.diagnostics if d.code == "ONP4014"]
    assert why in d.message and d.severity == "warning"


def test_format_without_ruff_is_a_one_line_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ruff.__main__", None)                  # the ruff package is not importable
    monkeypatch.setattr(formatting.shutil, "which", lambda *a, **k: None)              # and nothing on PATH
    with pytest.raises(locate.PortError, match="pip install ruff"):
        method_module.port_method(*ruff_triple(), format="ruff")
    t = [f"{RUFFCFG}:{c}._dummy_run" for c in ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")]
    rc = main(["port"] + ["--gpu-base", t[0], "--gpu-omni", t[1], "--npu-base", t[2], "--format", "ruff"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "pip install ruff" in err and len(err.splitlines()) == 1


def test_cli_format_and_line_length(capsys):
    t = [f"{RUFFCFG}:{c}._dummy_run" for c in ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")]
    args = ["--gpu-base", t[0], "--gpu-omni", t[1], "--npu-base", t[2]]
    assert main(["port"] + args + ["--format", "ruff", "--line-length", "120"]) == 0
    out = capsys.readouterr().out
    assert "num_reqs = min(num_tokens, self.max_num_reqs)" in out and "'talker'" in out
    assert main(["port"] + args + ["--line-length", "80"]) == 2                         # only with --format
    assert "--format ruff" in capsys.readouterr().err
    assert main(["port"] + args + ["--format", "black"]) == 2                # argparse: not a formatter


def test_format_class_mode_formats_methods_and_imports():
    f = FIX / "super_ext.py"
    locs = [locate.locate(f"{f}:{c}", False) for c in ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")]
    plain = classes_module.port_class(*locs)
    res = classes_module.port_class(*locs, format="ruff", line_length=40)
    assert "ONP4014" not in codes(res) and res.code != plain.code
    assert ast.dump(ast.parse(res.code)) == ast.dump(ast.parse(plain.code))
    assert res.code.count(merge.FENCE_TEXT) == plain.code.count(merge.FENCE_TEXT)
    d = next(d for d in res.diagnostics if d.code == "ONP1003")              # method-relative line, moved with the method
    meth = next(r for r in [method_module.port_method(*triple("super_ext", d.where), format="ruff", line_length=40)])
    assert "ACLGraphWrapper" in "".join(meth.code.splitlines()[d.line - 1: d.line + 2])


# --- ONP4015: NPU calls that now reach an omni override ------------------------------------------------------------

def test_override_warning_at_npu_calls_of_omni_overrides():
    res = method_module.port_method(*triple("override", "_dummy_run"))
    lines = res.code.splitlines()
    found = {re.search(r"self\.(\w+)\(", d.message).group(1): d for d in res.diagnostics if d.code == "ONP4015"}
    assert set(found) == {"_model_forward", "_prepare"}          # not self._sync() (not overridden), not omni's self._talker()
    for name, d in found.items():
        assert d.severity == "warning" and f"self.{name}(" in lines[d.line - 1]
    assert "do NOT fit" in found["_model_forward"].message        # NPU arguments, GPU-signature omni override
    assert "do NOT fit" not in found["_prepare"].message and "fit" in found["_prepare"].message   # via the omni mixin
    assert "now runs OmniMixin._prepare," in found["_prepare"].message                          # the class defining it
    assert "now runs OmniGPUModelRunner._model_forward," in found["_model_forward"].message
    assert "ONP4015" in REGISTRY and REGISTRY["ONP4015"].tool == "port"


def test_override_warning_follows_bases_into_other_modules_of_the_source():
    # the omni runner's mixin is imported through a package re-export; that mixin's own base sits in a sibling module
    # (relative import); the GPU base comes from vllm, outside the source: read, never imported
    gb, nb = (locate.locate(f"{FIX / 'override.py'}:{c}._dummy_run") for c in ("GPUModelRunner", "NPUModelRunner"))
    go = locate.locate(f"{FIX / 'override_tree'}:OmniGPUModelRunner._dummy_run")
    res = method_module.port_method(gb, go, nb)
    found = {re.search(r"self\.(\w+)\(", d.message).group(1): d for d in res.diagnostics if d.code == "ONP4015"}
    assert set(found) == {"_model_forward", "_prepare", "_sync"}
    assert "now runs OmniGPUModelRunner._model_forward," in found["_model_forward"].message
    assert "now runs vllm_omni.worker.mixins.OmniMixin._prepare," in found["_prepare"].message
    assert "now runs vllm_omni.worker.talker.TalkerMixin._sync," in found["_sync"].message
    assert "do NOT fit" in found["_sync"].message                  # `_sync(self, stream)` called with no argument
    assert "vllm" not in sys.modules and "vllm_omni" not in sys.modules


def test_override_warning_follows_a_lone_files_base_into_a_sibling_file():
    gb, nb = (locate.locate(f"{FIX / 'override.py'}:{c}._dummy_run") for c in ("GPUModelRunner", "NPUModelRunner"))
    res = method_module.port_method(gb, locate.locate(f"{FIX / 'override_split.py'}:OmniGPUModelRunner._dummy_run"), nb)
    [d] = [d for d in res.diagnostics if d.code == "ONP4015"]    # the GPU base's file is absent: nothing from it
    assert "self._prepare(...) now runs override_mixins.SplitMixin._prepare," in d.message


def test_override_warning_on_an_explicit_base_call():
    res = method_module.port_method(*triple("override", "load_model"))
    assert res.style == "super-call"
    ds = [d for d in res.diagnostics if d.code == "ONP4015"]
    assert {re.search(r"self\.(\w+)\(", d.message).group(1) for d in ds} == {"_model_forward", "_prepare"}
    assert all("NPUModelRunner.load_model(self" in res.code.splitlines()[d.line - 1] for d in ds)


def test_override_warning_absent_without_overrides():
    assert "ONP4015" not in codes(method_module.port_method(*triple("clean", "_dummy_run")))


def test_override_warning_in_class_mode_judges_the_ported_method():
    locs = [locate.locate(f"{FIX / 'override.py'}:{c}", False) for c in ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")]
    res = classes_module.port_class(*locs)
    cls = next(n for n in ast.parse(res.code).body if isinstance(n, ast.ClassDef))
    assert "_model_forward" in {f.name for f in cls.body if isinstance(f, ast.FunctionDef)}   # translated: NPU signature
    d = next(d for d in res.diagnostics if d.code == "ONP4015" and "_model_forward" in d.message)
    assert d.where == "_dummy_run" and "ported or translated" in d.message and "do NOT fit" not in d.message
    body = method_module.port_method(*triple("override", "_dummy_run")).code.splitlines()
    assert "self._model_forward(" in body[d.line - 1]                  # method-relative line, as every class-mode one


def test_override_warning_follows_formatting():
    res = method_module.port_method(*triple("override", "_dummy_run"), format="ruff", line_length=40)
    d = next(d for d in res.diagnostics if d.code == "ONP4015" and "_model_forward" in d.message)
    assert "self._model_forward(" in res.code.splitlines()[d.line - 1]


def test_conflict_omni_side_is_whole_and_no_omni_line_splits_a_header_from_its_body():
    # the NPU base rewrote the `with` (header and body) that omni wrote a block into: the conflict's omni side keeps that
    # block whole, down to the `)` closing its call, though `)` alone is also a base line; and the omni statement written
    # where the NPU base put its own `if self.drafter:` goes before that header, not between it and its body
    res = method_module.port_method(*triple("cut_call", "_dummy_run"))
    assert res.conflicts == 1
    lines = res.code.splitlines()
    mid, end = lines.index("======="), next(i for i, l in enumerate(lines) if l.startswith(">>>>>>>"))
    omni_side = lines[mid + 1: end]
    ast.parse(textwrap.dedent("\n".join(omni_side)))                        # whole statements
    assert omni_side[-1].strip() == "self.compilation_config.cache_dir = None"
    assert not any("self.model(" in l for l in omni_side)                   # base lines the NPU side deleted stay out
    masked, _ = formatting.mask_conflicts(lines)
    ast.parse("\n".join(masked))                                             # conflict markers aside, the port parses
    extract = next(i for i, l in enumerate(lines) if "extract_multimodal_outputs" in l)
    header = next(i for i, l in enumerate(lines) if l.strip() == "if self.drafter:")
    assert extract < header and merge.indent_of(lines[extract]) == merge.indent_of(lines[header])
    assert lines[header + 1].strip() == "self.drafter.dummy_run("
    for prefer in ("npu", "omni", "comment"):
        ast.parse(method_module.port_method(*triple("cut_call", "_dummy_run"), prefer=prefer).code)


def test_stale_region_yields_before_it_is_split():
    # the whole conflicting region repeats the older base; split into pieces, one piece (`elif mixed:`) is too short to
    # be recognised as stale and stayed a conflict against the NPU side's `else:`
    args = triple("stale_split", "_dummy_run")
    old = locate.locate(f"{FIX / 'stale_split_old.py'}:GPUModelRunner._dummy_run")
    assert method_module.port_method(*args).conflicts == 1                               # without history: a conflict
    res = method_module.port_method(*args, history=[old])
    assert res.conflicts == 0 and "ONP4012" in codes(res)
    ast.parse(res.code)
    assert "seq_lens = pad_for_paged_attention(n, self.vllm_config)" in res.code and "elif mixed" not in res.code
    assert "torch.tensor(" not in res.code and 'raise NotImplementedError("mixed batches' in res.code
    assert any("extract_multimodal_outputs" in "\n".join(b) for _, b in fenced_blocks(res.code))   # the real omni step


def test_a_region_cut_before_its_closing_bracket_still_matches_the_older_text():
    older = "x = torch.tensor(\n    [1] * n,\n    dtype=torch.int,\n)\n"
    assert merge.tokens_in(["x = torch.tensor(", "    [1] * n,", "    dtype=torch.int,"], older)   # cut before `)`
    assert not merge.tokens_in(["x = torch.tensor(", "    [2] * n,"], older)


# --- port --update: carry the previous release's NPU method forward (fixtures update_prev.py / update_new.py) ---

UPD_TARGET = "vllm-ascend==0.18.0"


def upd_specs(m, npu=False):
    "prev omni GPU, prev NPU, new omni GPU (and vllm-ascend old / new) specs of one method."
    s = [spec("update_prev", "OmniGPUModelRunner", m), spec("update_prev", "OmniNPUModelRunner", m),
         spec("update_new", "OmniGPUModelRunner", m)]
    return s + ([spec("update_prev", "NPUModelRunner", m), spec("update_new", "NPUModelRunner", m)] if npu else [])


def update(m, npu=False, **kw):
    return update_module.update_method(*[locate.locate(s) for s in upd_specs(m, npu)], target=UPD_TARGET, **kw)


def test_update_keeps_hand_made_lines_and_brings_in_the_gpu_change():
    res = update("_dummy_run")
    prev = locate.locate(spec("update_prev", "OmniNPUModelRunner", "_dummy_run")).method_source
    assert res.style == "update" and res.conflicts == 0
    ast.parse(res.code)
    for hand in ('"""Hand-written: warm the NPU graphs with a dummy batch."""',
                 "# NPU-specific: call the model directly, not _model_forward", "outputs = self.model(positions=positions)"):
        assert hand in res.code                                                # nothing hand-made is lost
    assert "torch.npu.synchronize()" in res.code and "torch.cuda" not in res.code   # the new GPU line, translated
    assert "self.talker_mtp(outputs, num_tokens)" in res.code and "self.talker_mtp(outputs)\n" not in res.code
    assert res.code.count(merge.FENCE_TEXT) == prev.count(merge.FENCE_TEXT)          # no fences by default
    [d] = [d for d in res.diagnostics if d.code == "ONP1002"]                 # the translator's diagnostic, on its line
    assert "torch.npu.synchronize()" in res.code.splitlines()[d.line - 1]


def test_update_fences_only_outside_blocks_the_previous_method_fences():
    res = update("_dummy_run", fence=True)
    lines = res.code.splitlines()
    sync = next(i for i, l in enumerate(lines) if "torch.npu.synchronize()" in l)
    assert merge.FENCE_RE.match(lines[sync - 1]) and merge.FENCE_RE.match(lines[sync + 1])   # new line outside: fenced
    prev = locate.locate(spec("update_prev", "OmniNPUModelRunner", "_dummy_run")).method_source
    assert res.code.count(merge.FENCE_TEXT) == prev.count(merge.FENCE_TEXT) + 2      # the changed talker line: no second fence
    assert [b for _, b in fenced_blocks(res.code) if any("self.talker_mtp(" in l for l in b)]   # still in its block
    ast.parse(res.code)


def test_update_conflict_names_both_sides_and_prefer_resolves_it():
    res = update("load_model")
    assert res.conflicts == 1 and "self.code2wav = self.model.code2wav" in res.code
    lines = res.code.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("<<<<<<<"))
    assert "previous NPU port" in lines[start] and 'device="npu"' in lines[start + 1]
    assert "lora_config=self.lora_config" in lines[start + 3]
    d = next(d for d in res.diagnostics if d.code == "ONP4001")
    assert d.line == start + 1 and "previous NPU method" in d.message
    kept = update("load_model", prefer="npu")
    ast.parse(kept.code)
    assert kept.conflicts == 0 and 'device="npu"' in kept.code and "lora_config" not in kept.code
    assert "self.code2wav = self.model.code2wav" in kept.code


def test_update_of_an_unchanged_gpu_method_is_the_previous_npu_method():
    res = update("talker_steps")
    prev = locate.locate(spec("update_prev", "OmniNPUModelRunner", "talker_steps")).method_source
    assert res.code == prev and [d.code for d in res.diagnostics] == ["ONP4017"]


def test_update_folds_in_the_vllm_ascend_change():
    res = update("_dummy_run", npu=True)
    assert "self.maybe_setup_kv_connector(num_tokens)" in res.code           # vllm-ascend's new line
    assert "outputs = self.model(positions=positions)" in res.code and "_model_forward" not in res.code.replace(
        "not _model_forward", "")                                            # the hand-made call stays
    assert "torch.npu.synchronize()" in res.code and res.conflicts == 0
    ast.parse(res.code)
    with pytest.raises(locate.PortError, match="both"):
        update_module.update_method(*[locate.locate(s) for s in upd_specs("_dummy_run", True)[:4]], target=UPD_TARGET)


def test_fold_keeps_the_previous_lines_where_vllm_ascend_changed_what_it_rewrote():
    old = "def f(self):\n    x = a(1)\n    return x\n"
    new = "def f(self):\n    x = a(2)\n    return x\n"
    prev = "def f(self):\n    x = a(1, npu=True)  # hand\n    return x\n"
    code, d = update_module.fold_npu_change(old, new, prev)
    assert code == prev and [x.code for x in d] == ["ONP4016"] and d[0].line == 2
    code, d = update_module.fold_npu_change(old, new, "def f(self):\n    x = a(1)\n    y = 3\n    return x\n")
    assert "x = a(2)" in code and "y = 3" in code and not d


def test_update_class_rewrites_only_the_class_methods_of_the_previous_module():
    C = lambda f, c: locate.locate(f"{FIX / f}.py:{c}", False)
    res = update_module.update_class(C("update_prev", "OmniGPUModelRunner"), C("update_prev", "OmniNPUModelRunner"),
                         C("update_new", "OmniGPUModelRunner"), target=UPD_TARGET, prefer="npu")
    ast.parse(res.code)
    prev = (FIX / "update_prev.py").read_text()
    head = prev[: prev.index("class OmniNPUModelRunner")]
    assert res.code.startswith(head)                                         # imports and other classes unchanged
    npu = locate.top_classes(ast.parse(res.code))["OmniNPUModelRunner"]
    assert list(locate.own_methods(npu)) == ["_dummy_run", "load_model", "talker_steps", "npu_only"]
    assert "torch.npu.synchronize()" in res.code and 'return "hand-made"' in res.code
    assert res.stats["styles"]["npu_only"] == "kept"
    assert {d.where for d in res.diagnostics if d.code == "ONP4017"} == {"talker_steps", "npu_only"}
    assert [d.where for d in res.diagnostics if d.code == "ONP4018"] == ["brand_new"]


@pytest.mark.parametrize("args", [
    ["--update", "--prev-gpu", "P", "--prev-npu", "N", "--gpu-omni", "G"], ["--prev-npu", "X"], ["--fence"],
    ["--gpu-base", "B", "--gpu-omni", "G", "--npu-base", "N", "--gpu-base-old", "X"], ["--release", "0.30.0", "--update"],
])
def test_cli_update_is_retired_with_a_pointer_to_the_release_update(args, capsys):
    "`--update` and its options answer with the command that replaced them, one line, exit 2, before any source is read."
    rc, _, err = run_port(args, capsys)
    assert rc == 2 and "--release NEW --from PREV" in err and err.count("\n") == 1


# --- scoring a port against a hand-written copy (`--against`, benchmarks/port_quality.py) --------------------------

HAND = FIX / "hand.py"


def test_split_prose_separates_comments_docstrings_and_keeps_strings_and_markers_as_code():
    src = ('def f(self):\n    """Doc\n    more."""\n    # own line\n    x = "a # b"  # trailing\n\n'
           '<<<<<<< NPU base\n    y = 1\n=======\n    y = 2  # omni side\n>>>>>>> omni GPU\n    return x\n')
    rows = score.split_prose(src)
    assert [p for _, p in rows if p] == ['"""Doc', 'more."""', "own line", "trailing", "omni side"]
    assert score.code_only(src).splitlines() == ["def f(self):", '    x = "a # b"', "<<<<<<< NPU base", "    y = 1",
                                             "=======", "    y = 2", ">>>>>>> omni GPU", "    return x"]
    # the whole text is tokenized: a comment after an open bracket is prose, a "#" inside a multi-line string is code
    src = 'def g():\n    z = f(  # why\n        1)\n    s = """\n    # kept\n    """\n    # note\n'
    assert score.code_only(src) == 'def g():\n    z = f(\n        1)\n    s = """\n    # kept\n    """\n'
    # where the whole does not tokenize (an unclosed bracket), each line is split on its own
    assert score.split_prose("def h():\n    z = f(  # why\n    # note\n") == [("def h():", ""), ("    z = f(", "why"), ("", "note")]


def test_invented_prose_skips_what_the_inputs_hold_and_what_the_tool_writes():
    inputs = ['def f(self):\n    "Omni doc."\n    # from the omni side\n    x = 1\n']
    hand = ('def f(self):\n    "Omni doc."\n    # from the omni side\n    # ---------Omni-new---------\n'
            '    x = 1  # Omni-new\n    # ONP4008 kept the NPU side\n    # my own words\n    y = 2  # mine too\n')
    assert score.invented_prose(hand, inputs) == [7, 8]
    assert score.invented_prose(hand) == [2, 3, 7, 8]                     # with no inputs their prose is invented too


def test_prose_ceiling_is_reached_by_the_hand_copy_without_its_invented_lines():
    ins = [l.method_source for l in triple("super_ext", "_model_forward")]
    hand = locate.locate(f"{HAND}:OmniNPUModelRunner._model_forward").method_source
    bad = score.invented_prose(hand, ins)
    lines = hand.splitlines()
    r, h = len(lines) - len(bad), len(lines)
    assert bad and score.prose_ceiling(hand, ins) == pytest.approx(2 * r / (r + h))
    best = "\n".join(l for i, l in enumerate(lines, 1) if i not in bad)
    assert score.similarity(best, hand) == pytest.approx(score.prose_ceiling(hand, ins))
    assert score.prose_ceiling("", ins) == 1.0


def test_no_code_without_the_invented_lines_beats_the_prose_ceiling():
    hyp = pytest.importorskip("hypothesis")
    st = hyp.strategies
    ins = [l.method_source for l in triple("super_ext", "_model_forward")]
    hand = locate.locate(f"{HAND}:OmniNPUModelRunner._model_forward").method_source
    lines, bad = hand.splitlines(), set(score.invented_prose(hand, ins))
    ceiling = score.prose_ceiling(hand, ins)
    allowed = [l for i, l in enumerate(lines, 1) if i not in bad] + ["    # other words", "    pass", ""]

    @hyp.settings(max_examples=150, deadline=None)
    @hyp.given(st.lists(st.sampled_from(allowed), max_size=2 * len(lines)))
    def bounded(port_lines):
        assert score.similarity("\n".join(port_lines), hand) <= ceiling + 1e-12

    bounded()


def test_score_against_the_hand_copy_of_an_inlined_super_extension():
    r = method_module.port_method(*triple("super_ext", "_model_forward"))
    hand = locate.locate(f"{HAND}:OmniNPUModelRunner._model_forward")
    s = score.score_result(r, hand, triple("super_ext", "_model_forward"))["_model_forward"]
    assert s.code_ratio == 1.0                                         # the same code, line for line
    assert s.ratio < s.ceiling < 1 and s.invented == 7
    assert s.ratio == pytest.approx(score.similarity(r.code, hand.method_source))


def test_score_result_of_a_class_port_scores_the_methods_both_define():
    C = lambda c: locate.locate(f"{FIX / 'super_ext'}.py:{c}", False)
    res = classes_module.port_class(C("GPUModelRunner"), C("OmniGPUModelRunner"), C("NPUModelRunner"))
    scores = score.score_result(res, locate.locate(f"{HAND}:OmniNPUModelRunner", False),
                            [C("GPUModelRunner"), C("OmniGPUModelRunner"), C("NPUModelRunner")])
    assert set(scores) == {"load_model", "_model_forward"}             # npu_only: the port has no such method
    assert scores["load_model"].ratio == 1.0 and scores["_model_forward"].code_ratio == 1.0


def test_cli_against_prints_scores_and_json_carries_them(capsys):
    args = ["--gpu-base", spec("super_ext", "GPUModelRunner", "_model_forward"),
            "--gpu-omni", spec("super_ext", "OmniGPUModelRunner", "_model_forward"),
            "--npu-base", spec("super_ext", "NPUModelRunner", "_model_forward")]
    rc, _, err = run_port(args + ["--against", f"{HAND}:OmniNPUModelRunner._model_forward"], capsys)
    line = next(l for l in err.splitlines() if "against" in l)
    assert rc == 0 and "_model_forward: similarity 0.513 (ceiling 0.811: 7 " in line and "code only 1.000" in line
    rc, text, _ = run_port(args + ["--against", f"{HAND}:OmniNPUModelRunner._model_forward", "--json"], capsys)
    got = json.loads(text)["against"]
    assert got["hand"].endswith("OmniNPUModelRunner._model_forward") and got["scores"]["_model_forward"]["invented"] == 7
    rc, _, err = run_port(args + ["--against", f"{HAND}:OmniNPUModelRunner._model_forwad"], capsys)
    assert rc == 2 and "close matches: _model_forward" in err and "Traceback" not in err


def test_cli_against_in_class_mode(capsys):
    C = lambda f, c: f"{FIX / f}.py:{c}"
    cls = ["--class", "--gpu-base", C("super_ext", "GPUModelRunner"), "--gpu-omni", C("super_ext", "OmniGPUModelRunner"),
           "--npu-base", C("super_ext", "NPUModelRunner")]
    rc, _, err = run_port(cls + ["--against", C("hand", "OmniNPUModelRunner")], capsys)
    # the port reads `get_forward_context`, bound nowhere: not ready (ONP4421), exit 1, as --release says (issue 31)
    assert rc == 1 and "ONP4421" in err and sum("against" in l for l in err.splitlines()) == 2
    rc, _, err = run_port(cls + ["--against", C("hand", "OmniNPUModelRunner") + ".load_model"], capsys)
    assert rc == 2 and "--against too" in err
    rc, _, err = run_port(cls + ["--against", C("update_prev", "NPUModelRunner")], capsys)
    assert rc == 1 and "no method of the port to score" in err


# --- update with vllm's own change taken out (--gpu-base-old / --gpu-base) ------------------------------------------

UV = FIX / "update_vllm.py"


def uv(cls, m="_dummy_run"):
    return locate.locate(f"{UV}:{cls}.{m}")


def test_update_takes_vllms_own_change_out_of_the_gpu_side():
    args = (uv("OmniGPUModelRunnerOld"), uv("OmniNPUModelRunnerOld"), uv("OmniGPUModelRunnerNew"))
    plain = update_module.update_method(*args, target=UPD_TARGET)
    assert plain.conflicts == 1 and "pad=True" in plain.code        # vllm's keyword meets the NPU rewrite of that line
    r = update_module.update_method(*args, target=UPD_TARGET, gpu_base_old=uv("GPUModelRunnerOld"), gpu_base=uv("GPUModelRunnerNew"))
    assert r.conflicts == 0 and "x = self.prepare_npu(num_tokens)" in r.code and "pad=True" not in r.code
    assert "self.log(talk)" in r.code                                # the omni side's own change still comes in
    assert "self.sync()" not in r.code                               # vllm's edit the omni method never took: not brought in
    ast.parse(r.code)


def test_rebase_applies_only_the_vllm_edits_the_new_omni_method_took():
    old, new = uv("GPUModelRunnerOld").method_source, uv("GPUModelRunnerNew").method_source
    prev, now = uv("OmniGPUModelRunnerOld").method_source, uv("OmniGPUModelRunnerNew").method_source
    base, diags = update_module.rebase_gpu_side(old, new, prev, now)
    assert "self.prepare(num_tokens, pad=True)" in base and "self.sync()" not in base and "self.talker(out)" in base
    assert diags == []
    base, _ = update_module.rebase_gpu_side(old, new, prev, prev)                # the omni method took nothing: the base is unchanged
    assert base == prev


def test_update_of_an_omni_method_that_changed_only_as_vllm_did_is_the_previous_npu_method():
    r = update_module.update_method(uv("OmniGPUModelRunnerOld"), uv("OmniNPUModelRunnerOld"), uv("OmniGPUModelRunnerVllmOnly"),
                        target=UPD_TARGET, gpu_base_old=uv("GPUModelRunnerOld"), gpu_base=uv("GPUModelRunnerNew"))
    assert r.code == uv("OmniNPUModelRunnerOld").method_source
    assert any(d.code == "ONP4017" and "only as vllm's own method did" in d.message for d in r.diagnostics)


def test_update_class_takes_vllms_change_out_per_method():
    C = lambda c: locate.locate(f"{UV}:{c}", False)
    r = update_module.update_class(C("OmniGPUModelRunnerOld"), C("OmniNPUModelRunnerOld"), C("OmniGPUModelRunnerNew"),
                       target=UPD_TARGET, gpu_base_old=C("GPUModelRunnerOld"), gpu_base=C("GPUModelRunnerNew"))
    assert r.conflicts == 0 and "self.prepare_npu(num_tokens)" in r.code and "self.log(talk)" in r.code
    with pytest.raises(locate.PortError, match="both the old and the new GPU base"):
        update_module.update_class(C("OmniGPUModelRunnerOld"), C("OmniNPUModelRunnerOld"), C("OmniGPUModelRunnerNew"),
                       target=UPD_TARGET, gpu_base=C("GPUModelRunnerNew"))


def test_every_port_and_audit_code_is_registered_with_its_notebook():
    "Each ONP4xxx code the port or audit modules raise is in core.diagnostics' registry, with what to do and where it is explained."
    import importlib
    import pkgutil
    import omni_npu_port.port as pkg
    mods = [importlib.import_module(f"omni_npu_port.port.{m.name}") for m in pkgutil.iter_modules(pkg.__path__)]
    used = {c for m in mods for c in re.findall(r"ONP4\d{3}", Path(m.__file__).read_text())}
    nbs = Path(__file__).parent.parent / "nbs"
    assert len(used) >= 26
    for c in sorted(used):
        info = REGISTRY[c]
        assert info.tool in ("port", "audit") and info.title and info.action and (nbs / info.notebook).is_file(), c


# ---- issue 13 part 4: never emit code that cannot parse without saying so --------------------------------------

MARK = re.compile(r"^(<<<<<<<|=======|>>>>>>>)")


def conflict_sides(code: str) -> list[tuple[list[str], list[str]]]:
    "The (NPU, omni) sides of each git-style conflict in a ported method."
    out, side, cur = [], None, None
    for line in code.splitlines():
        if line.startswith("<<<<<<<"): cur, side = ([], []), 0
        elif line.startswith("=======") and cur is not None: side = 1
        elif line.startswith(">>>>>>>") and cur is not None: out.append(cur); cur = None
        elif cur is not None: cur[side].append(line)
    return out


def whole(lines: list[str]) -> bool:
    "Whether lines are whole statements at the indentation of their first code line (lines inside brackets may sit left of it)."
    first = next((l for l in lines if l.strip()), "")
    ind = len(first) - len(first.lstrip())
    text = "\n".join(l[ind:] if not l[:ind].strip() else l.lstrip() for l in lines)
    header = first.lstrip().startswith(("@", "def ", "async def "))   # the method's own signature (its body follows)
    for cand in (text + "\n",) + ((text + "\n    pass\n",) if header else ()):
        try: ast.parse(cand); return True
        except SyntaxError: continue
    return False


def assert_port_parses(inputs, name=""):
    "Every conflict side whole statements; --prefer npu and --prefer omni outputs parse."
    res = method_module.port_method(*inputs)
    for npu, omni in conflict_sides(res.code):
        assert whole(npu) and whole(omni), (name, npu, omni)
    for prefer in ("npu", "omni"):
        r = method_module.port_method(*inputs, prefer=prefer)
        ast.parse(r.code)
        assert "ONP4006" not in codes(r), (name, prefer)
    return res


def test_conflicts_widen_to_whole_statements():
    res = assert_port_parses(triple("widen", "execute"))
    sides = conflict_sides(res.code)
    assert sides and "ONP4020" in codes(res)
    call = [l.strip() for l in sides[0][0]]
    assert call[0] == "out = self.model(" and call[-1] == ")" and "scale=0.5," in call   # the whole call, not its argument line
    for prefer, kept in (("npu", "scale=0.5"), ("omni", "talker=True")):
        assert kept in method_module.port_method(*triple("widen", "execute"), prefer=prefer).code


def fixture_triples():
    "(case, method) for every fixture triple whose three classes define a method of the same name."
    for f in sorted(FIX.glob("*.py")):
        if f.name.startswith("audit_"): continue
        try: classes = locate.top_classes(ast.parse(f.read_text()))
        except SyntaxError: continue
        if not {"GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner"} <= set(classes): continue
        names = [set(locate.own_methods(classes[c])) for c in ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")]
        for m in sorted(set.intersection(*names)): yield f.stem, m


@pytest.mark.parametrize("case, method", list(fixture_triples()))
def test_every_fixture_port_parses_either_way(case, method):
    assert_port_parses(triple(case, method), f"{case}:{method}")


from hypothesis import HealthCheck, given, settings, strategies as st

# statements of a small method, each with variants: one-line, a call over several lines, blocks with branches
UNITS = [
    ["    a = f(1)", "    a = f(2)", "    a = g(1)"],
    ["    r = self.model(\n        x,\n        k=1,\n    )", "    r = self.model(\n        x,\n        k=2,\n        extra=True,\n    )",
     "    r = self.model(\n        y,\n        k=1,\n    )"],
    ["    if a:\n        b = 1\n    else:\n        b = 2", "    if a:\n        b = 1\n    elif c:\n        b = 3",
     "    if a:\n        b = 1\n    else:\n        b = 4\n        c = 5"],
    ["    with ctx(a):\n        y = h(\n            a,\n        )", "    with ctx(a, b=1):\n        y = h(\n            a,\n        )",
     "    with ctx(a):\n        y = h(\n            a,\n            npu=1,\n        )"],
    ["    out = [\n        v\n        for v in a\n    ]", "    out = [\n        v + 1\n        for v in a\n    ]"],
    ["    try:\n        z = 1\n    except ValueError:\n        z = 2", "    try:\n        z = 3\n    except ValueError:\n        z = 2",
     "    try:\n        z = 1\n    finally:\n        z = 0"],
]


@st.composite
def method_triple(draw):
    "A base method from a few units, and an omni and an NPU variant: each unit kept, swapped for a variant, or dropped."
    units = draw(st.lists(st.sampled_from(range(len(UNITS))), min_size=1, max_size=6))
    def variant():
        body = []
        for u in units:
            pick = draw(st.sampled_from(["base", "variant", "drop", "insert"]))
            if pick == "drop": continue
            if pick == "insert": body.append(draw(st.sampled_from(UNITS))[0] + "  # new")
            body.append(UNITS[u][draw(st.integers(1, len(UNITS[u]) - 1))] if pick == "variant" else UNITS[u][0])
        return "def m(self, x, a, b, c, y):\n" + ("\n".join(body) or "    pass") + "\n    return a\n"
    base = "def m(self, x, a, b, c, y):\n" + "\n".join(UNITS[u][0] for u in units) + "\n    return a\n"
    return base, variant(), variant()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(method_triple())
def test_generated_conflicts_are_whole_statements(t):
    base, omni, npu = t
    hunks = merge.merge_hunks(base, omni, npu)
    for side in (0, 1):
        lines, owner = merge.side_text(hunks, side)
        tree = ast.parse("\n".join(lines) + "\n")             # keeping either side parses
        for k, h in enumerate(hunks):
            if h.kind != "conflict": continue
            assert whole(h.npu) and whole(h.omni)
            at = [i + 1 for i, o in enumerate(owner) if o == k and lines[i].strip() and not lines[i].lstrip().startswith("#")]
            assert not at or merge.statement_cut(tree, at[0], at[-1]) is None   # no statement cut in its context
    for prefer in ("npu", "omni"):
        lines, _ = merge.render(hunks, prefer=prefer)
        ast.parse("\n".join(lines) + "\n")


# ---- issue 13 part 3: every method gets an answer ---------------------------------------------------------------

TREE = FIX / "inherit_tree"
VLLM, ASCEND = str(TREE / "vllm_src"), str(TREE / "ascend_src")
OMNI = str(TREE / "omni_src" / "vllm_omni" / "worker" / "gpu_model_runner.py")


def tree_specs(m: str, omni_cls: str = "OmniGPUModelRunner", omni=OMNI):
    return ["--gpu-base", f"{VLLM}:GPUModelRunner.{m}", "--gpu-omni", f"{omni}:{omni_cls}.{m}",
            "--npu-base", f"{ASCEND}:NPUModelRunner.{m}"]


def test_method_the_npu_base_inherits_comes_from_the_next_source(capsys):
    with pytest.raises(locate.PortError, match="bases outside the sources given: GPUModelRunner"):
        locate.locate(f"{ASCEND}:NPUModelRunner._prepare_inputs")           # alone, the NPU source cannot answer
    nb = locate.locate(f"{ASCEND}:NPUModelRunner._prepare_inputs", extra=[VLLM])
    assert nb.owner == "GPUModelRunner" and nb.owner_module == "vllm.v1.worker.gpu_model_runner"
    rc, out, err = run_port(tree_specs("_prepare_inputs"), capsys)
    assert rc == 0 and "ONP4022" in err and "inherits _prepare_inputs from GPUModelRunner" in err
    assert "self.talker_positions = positions.clone()" in out and "torch.npu.synchronize()" in out
    assert "torch.cuda" not in out                                        # the inherited GPU method is translated too
    ast.parse(out)


def test_omni_only_method_is_ported_by_translation(capsys):
    rc, out, err = run_port(tree_specs("_talker_step"), capsys)
    assert rc == 0 and "ONP4007" in err and "omni's own method" in err
    assert "torch.npu.current_stream()" in out
    res = method_module.port_method(locate.locate(f"{VLLM}:GPUModelRunner", False), locate.locate(f"{OMNI}:OmniGPUModelRunner._talker_step"),
                        locate.locate(f"{ASCEND}:NPUModelRunner", False, [VLLM]))
    assert res.style == "omni-only" and codes(res)[0] == "ONP4007"


def test_a_method_no_side_has_is_an_error_listing_what_exists(capsys):
    rc, _, err = run_port(tree_specs("_talker_stepp"), capsys)
    assert rc == 2 and "has no method _talker_stepp" in err and "close matches: _talker_step" in err
    assert "its methods: _prepare_inputs, _talker_step, __init__" in err   # its own first, then inherited, across sources
    rc, _, err = run_port(tree_specs("_prepare_inputs")[:4] + ["--npu-base", f"{ASCEND}:NPUModelRunner._prepare_input"], capsys)
    assert rc == 2 and "close matches: _prepare_inputs" in err          # a typo in a base's spec is no omni-only method


def test_class_ports_every_omni_override_across_files_in_mro_order():
    gb, nb = locate.locate(f"{VLLM}:GPUModelRunner", False), locate.locate(f"{ASCEND}:NPUModelRunner", False, [VLLM])
    ar = locate.locate(f"{TREE}/omni_src/vllm_omni/worker/gpu_ar_model_runner.py:GPUARModelRunner", False, [VLLM])
    assert classes_module.omni_overrides(ar, gb) == ["__init__", "execute_model", "_prepare_inputs", "_talker_step"]
    res = classes_module.port_class(gb, ar, nb)
    mod = ast.parse(res.code)
    assert set(res.stats["styles"]) == {"_prepare_inputs", "_talker_step"}       # OmniGPUModelRunner's, from another file
    assert set(res.stats["inherited"]) == {"__init__", "execute_model"}          # super() reaches the NPU side already
    assert "import torch" in {ast.unparse(n) for n in mod.body if isinstance(n, ast.Import)}  # the other module's imports


# ---- issue 13 part 5: super() keeps its meaning -----------------------------------------------------------------

def landing_inputs():
    f = FIX / "super_landing.py"
    return [locate.locate(f"{f}:{c}.__init__") for c in ("GPUModelRunner", "GPUARModelRunner", "NPUModelRunner")]


def test_super_stays_where_it_already_reaches_the_npu_side():
    into = locate.locate(f"{FIX / 'super_landing.py'}:NPUARModelRunner", False)
    res = method_module.port_method(*landing_inputs(), into=into)
    assert res.style == "super-kept" and "super().__init__(config, device)" in res.code
    assert "NPUModelRunner.__init__" not in res.code                      # would skip OmniNPUModelRunner.__init__
    assert "ONP4021" in codes(res) and "torch.npu.Stream()" in res.code


def test_explicit_call_names_the_class_pythons_mro_reaches():
    f = FIX / "super_landing.py"
    assert "NPUModelRunner.__init__(self" in method_module.port_method(*landing_inputs()).code   # the default class: (omni, NPU base)
    # in MixedNPUModelRunner(GPUARModelRunner, OmniNPUModelRunner) super() from GPUARModelRunner reaches
    # OmniGPUModelRunner.__init__ first: the port calls it (ONP4024), never skipping it for an NPU-side class
    res = method_module.port_method(*landing_inputs(), into=locate.locate(f"{f}:MixedNPUModelRunner", False))
    assert "OmniGPUModelRunner.__init__(self, config, device)" in res.code and res.style == "super-call"
    assert "NPUModelRunner.__init__" not in res.code.replace("OmniGPUModelRunner.__init__", "")
    assert "ONP4024" in codes(res)


def test_cli_into(capsys):
    f = FIX / "super_landing.py"
    args = ["--gpu-base", f"{f}:GPUModelRunner.__init__", "--gpu-omni", f"{f}:GPUARModelRunner.__init__",
            "--npu-base", f"{f}:NPUModelRunner.__init__", "--into", f"{f}:NPUARModelRunner"]
    rc, out, err = run_port(args, capsys)
    assert rc == 0 and "super().__init__(config, device)" in out and "ONP4021" in err


# ---- issue 13: --against never silently returns no scores -------------------------------------------------------

def test_against_says_why_a_method_is_not_scored(capsys):
    C = lambda f, c: f"{FIX / f}.py:{c}"
    cls = ["--class", "--gpu-base", C("super_ext", "GPUModelRunner"), "--gpu-omni", C("super_ext", "OmniGPUModelRunner"),
           "--npu-base", C("super_ext", "NPUModelRunner")]
    rc, text, _ = run_port(cls + ["--against", C("update_prev", "NPUModelRunner"), "--json"], capsys)
    doc = json.loads(text)
    gaps = [d["message"] for d in doc["diagnostics"] if d["code"] == "ONP4023"]
    assert rc == 1 and not doc["against"]["scores"] and gaps                # no scores, and the JSON says why
    assert "ONP4421" in doc["stats"]["not_ready"]   # exit 1: the port reads a name bound nowhere, not ready (issue 31)
    assert any("does not define" in g for g in gaps)


@pytest.mark.slow
@pytest.mark.parametrize("omni, vllm, ascend", [("0.16.0", "0.16.0", "0.15.0rc1"), ("0.16.0", "0.16.0", "0.16.0rc1"),
                                               ("0.18.0", "0.18.0", "0.18.0rc1"), ("0.18.0", "0.18.0", "0.18.0")])
def test_real_ports_parse_either_way(release_source, omni, vllm, ascend):
    "Every conflict the port-quality pairings produce (no --gpu-history: the most conflicts): whole statements, both sides parse."
    v, a, o = release_source(f"vllm=={vllm}"), release_source(f"vllm-ascend=={ascend}"), release_source(f"vllm-omni=={omni}")
    gb, go = locate.locate(f"{v.origin}:GPUModelRunner", False), locate.locate(f"{o.origin}:OmniGPUModelRunner", False, [v.origin])
    nb = locate.locate(f"{a.origin}:NPUModelRunner", False, [v.origin])
    for name in classes_module.omni_overrides(go, gb):
        ins = [locate.method_located(gb, name) or gb, locate.method_located(go, name), locate.method_located(nb, name) or nb]
        assert_port_parses(ins, f"{omni}/{ascend}:{name}")


# ---- issue 13 (C3): super() never skips an intermediate omni class; bodies use the signature they get; compile()
def _levels(name, method=None):
    return locate.locate(f"{FIX / 'super_levels.py'}:{name}" + (f".{method}" if method else ""), False)


def _free_names(fn_code: str, module_names=("NPUModelRunner",)) -> set:
    "Names a method loads that it neither takes nor binds (builtins, self and the module's classes aside)."
    import builtins
    fn = ast.parse(textwrap.dedent(fn_code)).body[0]
    params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    bound = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return used - params - bound - set(dir(builtins)) - {"self", *module_names}


def test_class_port_super_reaches_the_intermediate_omni_class():
    res = classes_module.port_class(_levels("GPUModelRunner"), _levels("GPUDiffModelRunner"), _levels("NPUModelRunner"), prefer="npu")
    compile(res.code, "<port>", "exec")
    fwd = next(n for n in ast.walk(ast.parse(res.code)) if isinstance(n, ast.FunctionDef) and n.name == "_model_forward")
    called = {ast.unparse(c.func) for c in ast.walk(fwd) if isinstance(c, ast.Call)}
    # Python's MRO of the ported class reaches GPUGenModelRunner._model_forward from GPUDiffModelRunner's: never skip it
    assert "GPUGenModelRunner._model_forward" in called and "NPUModelRunner._model_forward" not in called
    assert "ONP4024" in [d.code for d in res.diagnostics]


def test_super_target_starts_after_the_class_the_method_comes_from():
    K_mro = classes_module.generated_mro("P", _levels("GPUDiffModelRunner"), _levels("NPUModelRunner"))
    assert [c.name for c in K_mro] == ["P", "GPUDiffModelRunner", "GPUGenModelRunner", "OmniGPUModelRunner",
                                       "NPUModelRunner", "GPUModelRunner"]
    gpu_side = {"GPUDiffModelRunner", "GPUGenModelRunner", "OmniGPUModelRunner"}
    t = supercalls.super_target(K_mro, "_dummy_run", gpu_side, owner="OmniGPUModelRunner")
    assert (t.reached, t.wanted, t.after, t.reaches_wanted) == ("NPUModelRunner", "NPUModelRunner", "OmniGPUModelRunner", False)


def test_adopted_npu_signature_renames_the_bodys_uses_of_renamed_parameters():
    res = method_module.port_method(_levels("GPUModelRunner", "_dummy_run"), _levels("OmniGPUModelRunner", "_dummy_run"),
                        _levels("NPUModelRunner", "_dummy_run"), super_style="call")
    assert "aclgraph_runtime_mode" in res.code.splitlines()[0]
    assert not _free_names(res.code), res.code
    assert not re.search(r"(\w+)=.*\b\1=", res.code)         # no keyword argument twice in the base call
    compile(textwrap.dedent(res.code), "<port>", "exec")


def test_a_body_using_a_parameter_the_npu_signature_lacks_keeps_its_signature():
    omni = "def _dummy_run(self, num_tokens, extra_flag=None):\n    return super()._dummy_run(num_tokens, extra_flag=extra_flag)\n"
    npu = "def _dummy_run(self, num_tokens, with_prefill=False):\n    return num_tokens\n"
    lines, d = supercalls.port_super_call(omni, npu, omni, "NPUModelRunner")
    assert not _free_names("\n".join(lines)) and "ONP4005" not in [x.code for x in d]


def test_the_port_checks_by_compiling_a_repeated_keyword_is_an_error():
    d = method_module.parse_check("def f(self):\n    return g(a=1, a=2)\n", "f")
    assert [x.code for x in d] == ["ONP4006"] and d[0].severity == "error"
    assert method_module.parse_check("def f(self):\n    return g(a=1, b=2)\n", "f") == []


# ---- issue 13: a widened conflict's sides are what each source wrote ---------------------------------------------
_CALL_BASE = "def f(self):\n    x = 1\n    out = Out(\n        a=1,\n        b=[],\n        c=3,\n    )\n    return out\n"
_CALL_OMNI = "def f(self):\n    x = 1\n    out = OmniOut(\n        a=1,\n        b=self.b,\n        c=3,\n    )\n    return out\n"
_CALL_NPU = "def f(self):\n    x = 1\n    model_out = Out(\n        a=1,\n        c=3,\n        b=[],\n        d=4,\n    )\n    return model_out\n"


def test_a_widened_conflict_takes_each_sides_own_lines():
    "A one-sided change next to a conflict, pulled into it, goes to its own side only: neither side mixes the other's lines in."
    hs = merge.merge_hunks(_CALL_BASE, _CALL_OMNI, _CALL_NPU)
    [c] = [h for h in hs if h.kind == "conflict"]
    assert c.npu == _CALL_NPU.splitlines()[2:8] and c.omni == _CALL_OMNI.splitlines()[2:7]
    for prefer in ("npu", "omni"):
        compile(textwrap.dedent("\n".join(merge.render(hs, prefer=prefer)[0])), "<port>", "exec")   # no keyword twice


def test_a_shift_never_moves_a_region_out_of_the_method_body():
    "An anchor matched at another depth would put omni's inserted block at column 0: it stays inside the body."
    a = [merge.CodeLine("    y = 2"), merge.CodeLine("    z = 3")]
    prev = ([merge.CodeLine("        )")], [merge.CodeLine(")")])        # a closing bracket matched at another depth
    assert merge.region_shift(prev, ([], []), a) == 0
    assert merge.region_shift(([merge.CodeLine("        w = 1")], [merge.CodeLine("    w = 1")]), ([], []), [merge.CodeLine("        y = 2")]) == -4


def test_a_class_port_imports_what_string_annotations_name_for_type_checkers_only():
    "A name read only in string annotations, which its module imports under `if TYPE_CHECKING:`, is imported the same way."
    f = FIX / "typing_only.py"
    res = classes_module.port_class(*(locate.locate(f"{f}:{c}", False) for c in ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")),
                       prefer="npu")
    code = res.code
    assert "if TYPE_CHECKING:\n    from vllm.v1.core.sched.output import SchedulerOutput" in code
    assert "from typing import TYPE_CHECKING" in code
    tree = ast.parse(code)
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not any(a.name == "SchedulerOutput" for n in top for a in n.names)      # never imported at run time
    assert classes_module.annotation_names(tree) == {"SchedulerOutput"}
    snippet = ast.parse('def f(a: "A", *b: "B | None", c: int = 1) -> "list[C]":\n    x: "D" = 1\n    return "E"\n')
    assert classes_module.annotation_names(snippet) == {"A", "B", "list", "C", "D"}          # not the returned string


def test_a_rename_keeps_most_of_the_name():
    "Aligned parameter lists: a renamed parameter has the same default and most of the old name; another parameter is no rename."
    sig = lambda s: ast.parse(f"def f(self, {s}): pass").body[0]
    npu = sig("num_tokens, with_prefill=False, aclgraph_runtime_mode=None, force_attention=False")
    assert supercalls.param_renames(sig("num_tokens, cudagraph_runtime_mode=None, force_attention=False"), npu) == \
        {"cudagraph_runtime_mode": "aclgraph_runtime_mode"}
    assert supercalls.param_renames(sig("num_tokens, extra_flag=None"), npu) == {}


def test_a_class_port_says_which_name_a_kept_line_reads_and_nothing_binds():
    "--prefer npu keeps the NPU side's binding line; omni's next line reads `extra`, which only omni's side bound: ONP4025."
    f = FIX / "dropped_binding.py"
    locs = [locate.locate(f"{f}:{c}", False) for c in ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")]
    res = classes_module.port_class(*locs, prefer="npu")
    compile(res.code, "<port>", "exec")
    found = [d for d in res.diagnostics if d.code == "ONP4025"]
    assert [d.message.rsplit(": ", 1)[1] for d in found] == ["`extra`"]
    assert "self.cache = extra" in res.code.splitlines()[found[0].line - 1]
    assert not [d for d in classes_module.port_class(*locs, prefer="omni").diagnostics if d.code == "ONP4025"]


def test_a_class_no_module_defines_gets_close_matches_from_the_whole_tree(tmp_path):
    "`NPUOmniModelRunner` where the tree has `OmniNPUModelRunner`: the error names it."
    pkg = tmp_path / "vllm_omni" / "worker"
    pkg.mkdir(parents=True)
    (tmp_path / "vllm_omni" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "npu_runner.py").write_text("class OmniNPUModelRunner:\n    def f(self):\n        return 1\n")
    with pytest.raises(locate.PortError, match="close matches: .*OmniNPUModelRunner"):
        locate.locate(f"{tmp_path / 'vllm_omni'}:NPUOmniModelRunner.f")


def test_a_source_that_exists_but_cannot_be_read_is_an_input_error(tmp_path, capsys):
    "A FIFO named like a wheel: exit 3 (input), never a hang; a path that does not exist: exit 2 (usage)."
    import os
    fifo = tmp_path / "x.whl"
    os.mkfifo(fifo)
    spec = lambda c: f"{fifo}:{c}.f"
    assert main(["port", "--gpu-base", spec("A"), "--gpu-omni", spec("B"), "--npu-base", spec("C")]) == 3
    assert "not a regular file" in capsys.readouterr().err
    gone = tmp_path / "missing"
    assert main(["port", "--gpu-base", f"{gone}:A.f", "--gpu-omni", f"{gone}:B.f", "--npu-base", f"{gone}:C.f"]) == 2


def test_a_parameter_both_sides_add_is_declared_once():
    "ONP4026: one declaration at the NPU base's place, the omni text (its body relies on the None default); it compiles."
    f = FIX / "param_twice.py"
    res = method_module.port_method(*[locate.locate(f"{f}:{c}._dummy_run") for c in ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")],
                        prefer="npu")
    compile(textwrap.dedent(res.code), "<port>", "exec")
    sig = ast.parse(textwrap.dedent(res.code)).body[0].args.args
    assert [a.arg for a in sig] == ["self", "num_tokens", "lora", "warm"]
    assert ast.unparse(ast.parse(textwrap.dedent(res.code)).body[0].args.defaults[0]) == "None"
    assert [d.code for d in res.diagnostics if d.code in ("ONP4026", "ONP4006")] == ["ONP4026"]


def test_copied_super_calls_reach_what_they_reached_in_their_own_class(tmp_path):
    ("`class NPUX(OmniGPUModelRunner, NPUModelRunner)`: the NPU base's `super().profile_run()` and the omni method's "
     "`super().shutdown()` would both reach OmniGPUModelRunner's GPU method, the one the port replaces; the port "
     "writes super(ThatClass, self) (ONP4027), and the ported class, run, calls what each line called in its own "
     "class.")
    loc = lambda c: locate.locate(f"{FIX / 'super_rebind.py'}:{c}", False)
    res = classes_module.port_class(loc("GPUModelRunner"), loc("OmniGPUModelRunner"), loc("NPUModelRunner"))
    assert "super(NPUModelRunner, self).profile_run()" in res.code and "super(OmniGPUModelRunner, self).shutdown()" in res.code
    assert sum(d.code == "ONP4027" for d in res.diagnostics) == 2
    (tmp_path / "ported.py").write_text(res.code)
    shutil.copy(FIX / "super_rebind.py", tmp_path)
    probe = ("import sys, types\n"
             "calls = []\n"   # a torch whose CUDA namespace is gone: the GPU method the port replaces cannot run
             "sys.modules['torch'] = types.SimpleNamespace(npu=types.SimpleNamespace(synchronize=lambda: calls.append('npu.sync')))\n"
             f"sys.path.insert(0, {str(tmp_path)!r})\n"
             "from ported import OmniNPUModelRunner as D\n"
             "r = D(); r.profile_run(); r.shutdown(); print(' '.join(calls + r.calls))")
    got = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["npu.sync", "omni.warmup", "prepare", "npu.warmup", "prepare", "gpu.dummy",
                                  "omni.shutdown", "gpu.shutdown"]


def test_translations_are_kept_between_runs_and_answer_only_their_own_question(tmp_path, monkeypatch):
    monkeypatch.setenv(translation.TCACHE_ENV, str(tmp_path / "kept"))
    src, mod = "def sync(self):\n    torch.cuda.synchronize()\n", "import torch\n"
    for age, old in enumerate(("c", "b", "a")):                          # older tool versions' folders: the newest two stay
        old = old * 20
        (tmp_path / "kept" / old).mkdir(parents=True); (tmp_path / "kept" / old / ("0" * 64 + ".json")).write_text("{}")
        os.utime(tmp_path / "kept" / old, (1e9 - age, 1e9 - age))
    translation.forget_translations()
    first = translation.translate_code(src, "vllm-ascend==0.18.0", mod)
    assert "torch.npu.synchronize()" in first[0] and len(list((tmp_path / "kept").glob(translation.code_fingerprint() + "/*.json"))) == 1
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == sorted(["b" * 20, "c" * 20, translation.code_fingerprint(), ".omni-npu-port-cache"])
    real = translation.translate_source
    def no_translator(*a, **k): raise AssertionError("translated again")
    monkeypatch.setattr(translation, "translate_source", no_translator)
    translation.forget_translations()                       # a new process: only the disk remembers
    again = translation.translate_code(src, "vllm-ascend==0.18.0", mod)
    assert again[0] == first[0] and [str(d) for d in again[1]] == [str(d) for d in first[1]]
    for other in ((src, "vllm-ascend==0.18.0", mod + "import os\n"),          # another module text: a miss
                  (src + "    return 1\n", "vllm-ascend==0.18.0", mod),       # another method
                  (src, "vllm-ascend==0.16.0rc1", mod)):                      # another target
        with pytest.raises(AssertionError, match="translated again"): translation.translate_code(*other)
    rules = translation.rules_for("vllm-ascend==0.18.0")                               # a record changed at run time: a miss
    for key in (("digest", False), ("digest", True)): monkeypatch.setitem(rules._memo, key, "changed")
    translation.forget_translations()
    with pytest.raises(AssertionError, match="translated again"): translation.translate_code(src, "vllm-ascend==0.18.0", mod)
    for key in (("digest", False), ("digest", True)): monkeypatch.delitem(rules._memo, key)
    monkeypatch.setattr(translation, "translate_source", real)
    for f in (tmp_path / "kept").glob(translation.code_fingerprint() + "/*.json"): f.write_bytes(b"not json")   # damaged: translated anew
    translation.forget_translations()
    assert translation.translate_code(src, "vllm-ascend==0.18.0", mod)[0] == first[0]
    monkeypatch.setenv(translation.TCACHE_ENV, "off")                                  # off: nothing kept
    translation.forget_translations()
    translation.translate_code(src + "    return 2\n", "vllm-ascend==0.18.0", mod)
    assert not list(tmp_path.glob("off*")) and translation.translation_cache() is None


def test_placed_code_keeps_multiline_string_values():
    "omni's added statements moved to the NPU base's depth: a triple-quoted string and f-string keep their values."
    from omni_npu_port.port.merge import merge_hunks
    base = "def f(self, x):\n    a = 1\n    b = 2\n    return a + b\n"
    omni = ('def f(self, x):\n    a = 1\n    note = """first\nsecond\n    third"""\n    msg = f"""v\n  tail"""\n'
            '    b = 2\n    return a + b\n')
    npu = "def f(self, x):\n    if x:\n        a = 1\n        b = 2\n    return a + b\n"
    added = next(h for h in merge_hunks(base, omni, npu) if h.kind == "omni").lines
    ns = {}
    exec("\n".join(l[8:] if l.startswith(" " * 8) else l for l in added), ns)   # the placed lines at column 0
    assert (ns["note"], ns["msg"]) == ("first\nsecond\n    third", "v\n  tail")
    assert added[0] == '        note = """first' and added[3] == '        msg = f"""v'   # the code itself moved


def test_shift_moves_every_code_line():
    from omni_npu_port.port.merge import _shift
    assert _shift(["    x = (1,", "         2)", "", "    y = 3"], 4) == ["        x = (1,", "             2)", "", "        y = 3"]
    assert _shift(["        x = 1", "        y = 2"], -4) == ["    x = 1", "    y = 2"]
