("Issue 31: a ported method never reads a name no binding reaches on some path - a statement the delta replaces keeps "
 "the NPU binding later NPU lines read, and a name only a commented conflict side binds is aliased to the name the "
 "kept side holds in its stead, or said (ONP4465, ONP4466); each rule on fixtures written here, where it fires and "
 "where not.")
import ast
import textwrap
from types import SimpleNamespace

import pytest

from omni_npu_port.port.dataflow import maybe_unbound, place_by_dataflow
from omni_npu_port.port.delta import _text_of, apply_delta

D = lambda s: textwrap.dedent(s).lstrip("\n")

BASE = D('''
    def sample(self, spec):
        tokens = self.sample_tokens()
        draft_after = False
        if spec:
            draft_after = spec.late()
        self.bookkeeping(tokens)
        if draft_after:
            self.propose(tokens)
        return tokens
''')
OMNI = BASE.replace("draft_after", "after_bookkeeping").replace("spec.late()", "spec.fits()")


def _npu(reads_later: bool) -> str:
    "vllm-ascend's shape: its own name for the flag, bound first, rebound under `if spec:`, read after (or not)."
    tail = "    self.npu_sync(use_padded)\n" if reads_later else ""
    return D('''
        def sample(self, spec):
            tokens = self.sample_tokens()
            use_padded = False
            if spec:
                use_padded = spec.padded()
        ''') + tail + "    self.bookkeeping(tokens)\n    return tokens\n"


def _unbound(text: str) -> list[str]:
    return [x for x, _ in maybe_unbound(ast.parse(text).body[0])]


def test_maybe_unbound_follows_paths_as_the_checker_does():
    assert _unbound(_npu(True).replace("    use_padded = False\n", "", 1)) == ["use_padded"]   # bound under `if` only
    assert _unbound(_npu(True)) == []
    loop = "def f(self):\n    while True:\n        out = self.step()\n        if out: break\n    return out\n"
    assert _unbound(loop) == []                                                             # the break carries it
    assert _unbound(loop.replace("while True", "for _ in self.steps")) == ["out"]             # the loop may not run


def test_a_replaced_npu_binding_that_later_npu_lines_read_is_kept():
    d = apply_delta(BASE, OMNI, _npu(True), "sample")
    text = _text_of(d.hunks)
    assert "    use_padded = False\n" in text and "    after_bookkeeping = False\n" in text
    assert _unbound(text) == []
    env = {}
    exec(text, env)
    me = SimpleNamespace(sample_tokens=lambda: [1], npu_sync=lambda u: None, bookkeeping=lambda t: None)
    assert env["sample"](me, None) == [1]                                        # no UnboundLocalError without spec


def test_a_replaced_npu_binding_no_later_line_reads_is_not_kept():
    text = _text_of(apply_delta(BASE, OMNI, _npu(False), "sample").hunks)
    assert "use_padded = False" not in text and "    after_bookkeeping = False\n" in text


CONFLICT = [("npu", "def sample_tokens(self, state):"), ("npu", "    model_runner_output = self.build(state)"),
            ("port", "    # <<<<<<< ONP4001 conflict: NPU base (kept)"),
            ("npu", "    if not self.use_async_scheduling:"), ("npu", "        return model_runner_output"),
            ("port", "    # ======= omni GPU (commented out)"), ("omni", "    # output = self.builder()"),
            ("omni", "    # if not self.use_async_scheduling:"), ("omni", "    #     return output"),
            ("port", "    # >>>>>>>"), ("omni", "    return self.wrap(model_runner_output=output)")]


def _port(rows):
    return place_by_dataflow([l for _, l in rows], [o for o, _ in rows])


def test_a_name_only_the_commented_side_binds_is_aliased_to_the_name_the_kept_side_holds():
    out, _, diags = _port(CONFLICT)
    assert out[10] == "    output = model_runner_output" and out[11].strip().startswith("return self.wrap")
    assert [d.code for d in diags] == ["ONP4465"] and diags[0].line == 11
    assert "`output`" in diags[0].message and "`model_runner_output`" in diags[0].message
    env = {}
    exec("\n".join(out), env)
    me = SimpleNamespace(build=lambda s: ("built", s), use_async_scheduling=True, wrap=lambda **k: k)
    assert env["sample_tokens"](me, 1) == {"model_runner_output": ("built", 1)}


def test_nothing_on_the_kept_side_stands_for_it_is_an_error_naming_the_name_and_line():
    rows = CONFLICT[:4] + [("npu", "        return None")] + CONFLICT[5:]
    out, _, diags = _port(rows)
    assert out == [l for _, l in rows]
    assert [(d.code, d.line) for d in diags] == [("ONP4466", 11)] and "`output`" in diags[0].message


@pytest.mark.parametrize("live", ["    output = model_runner_output", "    output = self.fallback()"])
def test_a_name_bound_live_before_the_read_is_left_alone(live):
    rows = CONFLICT[:2] + [("npu", live)] + CONFLICT[2:]
    out, _, diags = _port(rows)
    assert out == [l for _, l in rows] and diags == []


def test_a_name_error_on_a_path_the_inputs_method_has_is_inherited_and_no_other():
    from omni_npu_port.port import judge as J
    err = lambda stmt, fn, name, rule="reportPossiblyUnboundVariable", code="ONP4441": J.CheckerError(
        "m/p.py", 3, 1, code, rule, f'"{name}" is possibly unbound', name, stmt, fn)
    theirs = {err("state = State(h, x)", "NPUModelRunner.execute_model", "h").key,
              err("f(a, b=1)", "NPUModelRunner.execute_model", "f", "reportCallIssue", "ONP4442").key}
    port = [err("state = State(hidden=h)", "Port.execute_model", "h"),                # the input's path: inherited
            err("y = h", "Port.sample_tokens", "h"),                                  # another method: the port's
            err("z = g", "Port.execute_model", "g"),                                  # another name: the port's
            err("f(a, c=1)", "Port.execute_model", "f", "reportCallIssue", "ONP4442")]   # not a name rule: the port's
    j = J._verdict("m.p", port, theirs, J.JudgeContext({}))
    assert [d.code for d in j.inherited] == ["ONP4445"] and len(j.port) == 3
    assert "hidden=h" not in " ".join(d.message for d in j.port) and j.inherited[0].where == "Port.execute_model"
