"Issue 24: where vllm-ascend's method wraps vllm's through super() and omni's method replaces vllm's, omni's translated body is inlined at the call (or the call kept, with the reason) — fixtures written here."
import re
import textwrap

import pytest

from omni_npu_port.port.locate import locate
from omni_npu_port.port.merge import FENCE_TEXT
from omni_npu_port.port.method import port_method
from omni_npu_port.port.release_checks import check_method
from omni_npu_port.port.wraps import port_npu_wraps

D = lambda s: textwrap.dedent(s).lstrip("\n")
HEAD = f"    {FENCE_TEXT}\n    # GPUGen.profile_run inlined (ONP4415)\n"
TAIL = f"    {FENCE_TEXT}\n"

NPU = D('''
    def profile_run(self, num_tokens) -> None:
        self.eplb_warmup()
        cap = get_mc2_tokens_capacity()
        if num_tokens > cap:
            self._dummy_run(cap, is_profile=True)
        super().profile_run(num_tokens, fast=True)
''')


def wraps(npu, omni):
    lines, origins, diags, style = port_npu_wraps(npu, omni, "GPUGen", "profile_run")
    text = "\n".join(lines) + "\n"
    compile(text, "<port>", "exec")                      # every form the port writes compiles
    assert len(origins) == len(lines) and [d.code for d in diags] == ["ONP4415"]
    return text, style, diags[0].message


def test_omni_body_is_inlined_with_its_parameters_bound():
    omni = D('''
        def profile_run(self, num, fast=False, warm=2) -> None:
            """Omni's profile run."""
            # profile the encoder first
            hidden = self._dummy_run(num, is_profile=True, warm=warm)
            if fast:
                self.encoder_cache.clear()
            del hidden
    ''')
    text, style, msg = wraps(NPU, omni)
    assert style == "npu-wraps-inline"
    body = ("    num = num_tokens\n    fast = True\n    warm = 2\n    # profile the encoder first\n"
            "    hidden = self._dummy_run(num, is_profile=True, warm=warm)\n    if fast:\n        self.encoder_cache.clear()\n"
            "    del hidden\n")
    assert text == NPU.replace("    super().profile_run(num_tokens, fast=True)\n", HEAD + body + TAIL)
    assert "inlined" in msg and "parameters bound: num = num_tokens, fast = True, warm = 2" in msg


def test_a_parameter_passed_as_the_npu_local_of_its_name_shares_it():
    npu = NPU.replace("super().profile_run(num_tokens, fast=True)", "super().profile_run(num_tokens)")
    omni = "def profile_run(self, num_tokens):\n    self._dummy_run(num_tokens)\n"
    text, style, msg = wraps(npu, omni)
    assert style == "npu-wraps-inline" and text.endswith(HEAD + "    self._dummy_run(num_tokens)\n" + TAIL)
    assert "bound" not in msg


def test_an_early_return_keeps_the_call_where_npu_lines_follow():
    npu = NPU + "    self.after_profile()\n"
    omni = D('''
        def profile_run(self, num, fast=False):
            if not self.supports_mm_inputs:
                return
            self._dummy_run(num)
    ''')
    text, style, msg = wraps(npu, omni)
    assert style == "npu-wraps"
    assert text == npu.replace("super().profile_run(num_tokens, fast=True)", "GPUGen.profile_run(self, num_tokens, fast=True)")
    assert "not inlined: omni's method returns early (line 3) and the call is not the NPU method's last statement" in msg


def test_an_early_return_inlines_where_the_call_is_the_npu_methods_last_statement():
    omni = D('''
        def profile_run(self, num, fast=False):
            if not self.supports_mm_inputs:
                return
            self._dummy_run(num)
    ''')
    text, style, _ = wraps(NPU, omni)
    assert style == "npu-wraps-inline"
    assert text.endswith(HEAD + "    num = num_tokens\n    fast = True\n    if not self.supports_mm_inputs:\n"
                         "        return\n    self._dummy_run(num)\n" + TAIL)
    valued = omni.replace("return\n", "return 1\n")      # a value the NPU method would now return: kept as a call
    text, style, msg = wraps(NPU, valued)
    assert style == "npu-wraps" and "returns a value early (line 3)" in msg


@pytest.mark.parametrize("call", ["super().profile_run(num)", "super()._dummy_run(num)"])
def test_an_omni_method_that_calls_super_keeps_the_call(call):
    omni = f"def profile_run(self, num, fast=False):\n    self.before()\n    {call}\n"
    text, style, msg = wraps(NPU, omni)
    assert style == "npu-wraps" and "GPUGen.profile_run(self, num_tokens, fast=True)" in text and "super()" not in text
    assert "not inlined: omni's method calls super() (line 3)" in msg


def test_omni_locals_the_npu_method_spells_are_renamed():
    omni = D('''
        def profile_run(self, num, fast=False):
            cap = self.encoder_budget(num)
            for i in range(cap):
                self._dummy_run(i)
            return cap
    ''')
    npu = NPU.replace("self.eplb_warmup()", "self.eplb_warmup()\n    i = 0")
    text, style, msg = wraps(npu, omni)
    assert style == "npu-wraps-inline"
    assert text.endswith(HEAD + "    num = num_tokens\n    fast = True\n    cap_omni = self.encoder_budget(num)\n"
                         "    for i_omni in range(cap_omni):\n        self._dummy_run(i_omni)\n" + TAIL)
    assert "renamed (the NPU method spells them too): cap -> cap_omni, i -> i_omni" in msg
    assert "final `return` dropped" in msg


def test_a_module_name_the_npu_method_binds_as_a_local_keeps_the_call():
    omni = "def profile_run(self, num, fast=False):\n    self._dummy_run(min(num, cap))\n"   # omni's `cap` is its module's
    text, style, msg = wraps(NPU, omni)
    assert style == "npu-wraps" and "reads `cap` from its module, which the NPU method binds as a local" in msg


def test_the_value_of_the_call_used_keeps_the_call():
    npu = NPU.replace("    super().profile_run(num_tokens, fast=True)\n", "    out = super().profile_run(num_tokens)\n    return out\n")
    text, style, msg = wraps(npu, "def profile_run(self, num):\n    return self._dummy_run(num)\n")
    assert style == "npu-wraps" and "out = GPUGen.profile_run(self, num_tokens)" in text
    assert "uses the value of `super().profile_run(...)`" in msg


def test_a_final_return_expression_stays_and_a_multiline_string_keeps_its_text():
    omni = D('''
        def profile_run(self, num, fast=False):
            if fast:
                note = """first
          second"""
                self.log(note)
            return self.finish(num)
    ''')
    npu = NPU.replace("    super()", "    with self.guard():\n        super()")
    text, style, msg = wraps(npu, omni)
    assert style == "npu-wraps-inline"
    assert '            note = """first\n  second"""\n' in text       # the string's own line is not re-indented
    assert text.endswith("        self.finish(num)\n" + f"        {FENCE_TEXT}\n") and "kept as the expression" in msg


def _write(tmp_path, name, text):
    (tmp_path / f"{name}.py").write_text(D(text))
    cls = re.search(r"class (\w+)", text)[1]
    return locate(f"{tmp_path / name}.py:{cls}.profile_run")


def test_port_method_inlines_omnis_translated_body(tmp_path):
    gpu = _write(tmp_path, "gpu", '''
        import torch
        class GPUModelRunner:
            def profile_run(self) -> None:
                hidden_states = self._dummy_run(self.max_num_tokens)
                logits = self.compute_logits(hidden_states)
                torch.cuda.synchronize()
                del hidden_states, logits
    ''')
    omni = _write(tmp_path, "omni", '''
        import gc
        import torch
        from gpu import GPUModelRunner
        class GPUGenerationModelRunner(GPUModelRunner):
            def profile_run(self) -> None:
                hidden_states = self._dummy_run(self.max_num_tokens, is_profile=True)
                torch.cuda.synchronize()
                del hidden_states
                gc.collect()
    ''')
    npu = _write(tmp_path, "npu", '''
        from gpu import GPUModelRunner
        class NPUModelRunner(GPUModelRunner):
            def profile_run(self) -> None:
                self.eplb_warmup()
                cap = get_mc2_tokens_capacity()
                if self.max_num_tokens > cap:
                    self._dummy_run(cap, with_prefill=True, is_profile=True)
                super().profile_run()
    ''')
    res = port_method(gpu, omni, npu, target="vllm-ascend==0.18.0")
    assert res.style == "npu-wraps-inline" and "super()" not in res.code and "GPUGenerationModelRunner.profile_run(" not in res.code
    assert "    torch.npu.synchronize()\n    del hidden_states\n    gc.collect()\n" in res.code and "cuda" not in res.code
    [sync] = [d for d in res.diagnostics if d.code == "ONP1002"]          # the translator's finding, on the inlined line
    assert "torch.npu.synchronize()" in res.code.splitlines()[sync.line - 1]
    compile(res.code, "<port>", "exec")
    m = check_method("profile_run", res.style, res.code, omni.method_source, omni.method_source, gpu.method_source,
                     gpu.method_source, npu.method_source)
    assert m.lost == 0 and m.omni_live == m.omni_added > 0


@pytest.mark.slow
def test_a_real_release_profile_run_is_inlined_and_runs_no_cuda_call(real_release_port):
    from omni_npu_port.port.release import method_chunks
    res = real_release_port("0.30.0")
    [gen] = [r for r in res.runners if r.cls == "NPUGenerationModelRunner"]
    code = textwrap.dedent(method_chunks(gen.code, gen.cls)["profile_run"])
    assert {m.name: m.style for m in gen.methods}["profile_run"] == "npu-wraps-inline"
    compile(code, "<port>", "exec")
    live = [l.split("#")[0] for l in code.splitlines()]
    assert not [l for l in live if re.search(r"cuda|nccl", l, re.I)]                  # no CUDA-only call left after translation
    assert "super().profile_run()" not in code and "self.encoder_cache.clear()" in code and "self.eplb_warmup()" in code
    [d] = [d for d in gen.diagnostics if d.code == "ONP4415" and d.where == "profile_run"]
    assert ": inlined: omni's GPUGenerationModelRunner.profile_run body" in d.message
    [omni_npu] = [r for r in res.runners if r.cls == "OmniNPUModelRunner"]           # _update_states uses the call's value
    [u] = [d for d in omni_npu.diagnostics if d.code == "ONP4415" and d.where == "_update_states"]
    assert "not inlined: the NPU method uses the value of `super()._update_states(...)`" in u.message


@pytest.mark.parametrize("omni, why", [
    ("@torch.inference_mode()\ndef profile_run(self, num, fast=False):\n    self._dummy_run(num)\n", "decorated (`@torch.inference_mode()`)"),
    ("def profile_run(self, num, fast=False):\n    self.__warm(num)\n", "private name `__warm`"),
    ("def profile_run(self, num, fast=False):\n    yield self._dummy_run(num)\n", "holds `yield`"),
    ("def profile_run(self, *nums, fast=False):\n    self._dummy_run(*nums)\n", "takes *args / **kwargs"),
])
def test_what_inlined_would_run_otherwise_keeps_the_call(omni, why):
    text, style, msg = wraps(NPU, omni)
    assert style == "npu-wraps" and "GPUGen.profile_run(self, num_tokens, fast=True)" in text and why in msg


def test_a_decorated_npu_method_still_inlines_and_renamed_statements_count_as_live():
    npu = "@torch.inference_mode()\n" + NPU
    omni = "def profile_run(self, num, fast=False):\n    cap = self.budget(num)\n    self._dummy_run(cap)\n"
    text, style, _ = wraps(npu, omni)
    assert style == "npu-wraps-inline" and text.startswith("@torch.inference_mode()\ndef profile_run(")
    assert "    cap_omni = self.budget(num)\n    self._dummy_run(cap_omni)\n" in text
    base = "def profile_run(self, num, fast=False):\n    self._dummy_run(num)\n"
    m = check_method("profile_run", style, text, omni, omni, base, base, npu)
    assert m.lost == 0 and m.omni_added == 2 and m.omni_live == 2
