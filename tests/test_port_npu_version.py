"""A conflict over a statement the NPU base also edited sits at the NPU's version of it (issue 31, 0.23.0rc1's
`outputs`): where the NPU base rewrote the block holding the base statement omni replaces, the one NPU statement no
base statement pairs with that calls what the base statement calls is the NPU side (`delta.npu_version`); and a
name only omni's commented side binds is aliased to the name the NPU side assigns there (ONP4465). Fixtures are
written here; where the rule must fire and where it must not."""
import ast
import textwrap

from omni_npu_port.port.dataflow import place_by_dataflow, stands_for
from omni_npu_port.port.delta import _text_of, apply_delta

D = lambda s: textwrap.dedent(s).lstrip("\n")

BASE = D('''
    def execute_model(self, batch):
        ready = self.prepare(batch)
        with forward_context(batch, label="gpu: forward"):
            model_output = self._model_forward(ids=batch.ids, pos=batch.pos)
        with labelled("gpu: postprocess"):
            hidden = model_output
        return hidden
''')
OMNI = D('''
    def execute_model(self, batch):
        ready = self.prepare(batch)
        with forward_context(batch, label="gpu: forward"):
            outputs = self._run_generation_model(ids=batch.ids, pos=batch.pos)
        hidden = self.extract(outputs)
        return hidden
''')


def _npu(calls: int) -> str:
    "vllm-ascend's shape: its own forward `with` (other items, another statement first) calling `_model_forward`."
    extra = "        draft_states = self._model_forward(batch.ids, batch.pos)\n" * (calls - 1)
    return D('''
        def execute_model(self, batch):
            ready = self.prepare(batch)
            with (labelled("forward"), ascend_forward_context(batch, npu=True)):
                self.copy_blocks(batch)
                hidden_states = self._model_forward(batch.ids, batch.pos)
        ''') + extra + D('''
            with labelled("post process"):
                hidden = self.npu_post(hidden_states)
            return hidden
        ''').replace("\n", "\n    ").rstrip(" ").join(["    ", ""])


def test_the_conflict_sits_at_the_npu_version_with_it_as_the_npu_side():
    d = apply_delta(BASE, OMNI, _npu(1), "execute_model")
    [c] = [h for h in d.hunks if h.kind == "conflict"]
    assert [l.strip() for l in c.npu] == ["hidden_states = self._model_forward(batch.ids, batch.pos)"]
    assert "outputs = self._run_generation_model" in c.omni[0]
    [h] = [h for h in d.delta if "in a block it rewrote" in h.why]
    assert "the NPU base edits it too, as `hidden_states = self._model_forward" in h.why
    text = _text_of(d.hunks)
    assert text.count("self._model_forward(") == 1   # the NPU side stands in the NPU's `with`, not twice


def test_two_npu_statements_calling_it_are_no_version_the_old_place_stands():
    "Must not fire: two unpaired NPU statements call `_model_forward`: none is the NPU's version; NPU side empty."
    d = apply_delta(BASE, OMNI, _npu(2), "execute_model")
    [c] = [h for h in d.hunks if h.kind == "conflict"]
    assert c.npu == [] and "outputs = self._run_generation_model" in c.omni[0]


ROWS = [("npu", "def run(self, batch):"), ("port", "    # <<<<<<< ONP4001 conflict: NPU base (kept)"),
        ("npu", "    hidden_states = self._model_forward(batch.ids, batch.pos)"),
        ("port", "    # ======= omni GPU (commented out)"),
        ("omni", "    # outputs = self._run_generation_model(ids=batch.ids)"),
        ("port", "    # >>>>>>>"), ("omni", "    return self.extract(outputs)")]


def _port(rows):
    return place_by_dataflow([l for _, l in rows], [o for o, _ in rows])


def test_a_name_one_call_assigns_on_each_side_is_aliased_to_the_npu_name():
    out, _, diags = _port(ROWS)
    assert out[6] == "    outputs = hidden_states" and [d.code for d in diags] == ["ONP4465"]
    assert "`outputs`" in diags[0].message and "`hidden_states`" in diags[0].message


def test_an_npu_side_that_assigns_no_name_stands_for_nothing():
    "Must not fire: the NPU side calls without binding (or holds two statements): ONP4466, the read unbound."
    rows = ROWS[:2] + [("npu", "    self._model_forward(batch.ids, batch.pos)")] + ROWS[3:]
    out, _, diags = _port(rows)
    assert out == [l for _, l in rows] and [d.code for d in diags] == ["ONP4466"]
    two = [ast.parse("h = self.f(a)").body[0], ast.parse("g = self.f(b)").body[0]]
    assert stands_for(two, [ast.parse("outputs = self.run(a=a)").body[0]], "outputs") is None


SAMPLE = D('''
    def sample(self, spec):
        tokens = self.sample_tokens()
        draft_after = False
        if spec:
            draft_after = spec.fits()
        self.bookkeeping(tokens)
        if draft_after:
            if spec.ready():
                self.propose(tokens)
        return tokens
''')
# omni keeps an older vllm's name for the flag (and the older block); vllm-ascend proposes in a loop of its own
SAMPLE_OMNI = SAMPLE.replace("draft_after", "propose_after").replace(
    "            if spec.ready():\n                self.propose(tokens)\n", "            self.propose(tokens)\n")


def _sample_npu(binds_flag: bool) -> str:
    flag = "    propose_after = self.ngram(spec)\n" if binds_flag else ""
    return D('''
        def sample(self, spec):
            tokens = self.sample_tokens()
            self.bookkeeping(tokens)
        ''') + flag + D('''
            for req in self.ngram_requests(spec):
                self.propose_one(req)
            return tokens
        ''').replace("\n", "\n    ").rstrip(" ").join(["    ", ""])


def test_an_edit_reading_omnis_older_name_for_a_binding_the_npu_base_removed_is_taken_out():
    ("omni's `if propose_after:` reads a flag omni binds only where vllm binds `draft_after`, which vllm-ascend "
     "removed: placed live it would read a name bound nowhere; taken out (not applied), naming the flag.")
    d = apply_delta(SAMPLE, SAMPLE_OMNI, _sample_npu(False), "sample")
    text = _text_of(d.hunks)
    assert "propose_after" not in text and "self.propose_one(req)" in text
    assert any("every binding of `propose_after`" in h.why for h in d.delta)


def test_a_flag_the_npu_method_binds_keeps_the_edit():
    "Must not fire: the NPU method binds `propose_after` itself: omni's `if propose_after:` reads a bound name, kept."
    d = apply_delta(SAMPLE, SAMPLE_OMNI, _sample_npu(True), "sample")
    assert "if propose_after:" in _text_of(d.hunks)
    assert not any("every binding of" in h.why for h in d.delta)
