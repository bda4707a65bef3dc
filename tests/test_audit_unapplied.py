"""Audit rule 33 (issue 32, made from 0.28's miss `NPUGenerationModelRunner._dummy_run`): an omni hunk the new port
could not apply (ONP4412) is left out of the update, so the update's diff never shows it; the lines omni's GPU method
wrote since PREV inside the statement the note names, that the copy lacks, are owed (ONP4132). Fixtures: texts written
here and tests/fixtures/update. Nothing is fetched."""
from pathlib import Path
from types import SimpleNamespace as NS

from omni_npu_port.port.audit import (AuditSides, gpu_gained, inserted, kept_findings, method_keys, omni_named,
                                     statement_lag, stream)

UPD = Path(__file__).parent / "fixtures" / "update"
PREV = ("def _dummy_run(self, n):\n    if self.mm and not self.enc:\n        ids, embeds = None, self.embed(n)\n"
        "    else:\n        ids, embeds = self.ids[:n], None\n    return ids, embeds\n")
NEW = PREV.replace("    else:", "    elif self.model.has_preprocess:\n        ids, embeds = self.ids[:n], self.embeds[:n]\n"
                   "    else:")
NOTE = ("an omni hunk could not be applied: replace `if self.mm and (not self.enc):` …: the NPU base edits "
        "`if self.mm and (not self.enc):` too, differently")
ELIF = ["elif self . model . has_preprocess :", "ids , embeds = self . ids [ : n ] , self . embeds [ : n ]"]


def test_omni_lines_inside_the_statement_the_port_could_not_edit_are_owed():
    assert statement_lag(NEW, gpu_gained(PREV, NEW, stream(method_keys(PREV))), NOTE) == ELIF
    cut = NOTE.replace("(not self.enc):", "(not self.e")   # the note's quote is cut at 70 characters
    assert statement_lag(NEW, gpu_gained(PREV, NEW, stream(method_keys(PREV))), cut) == ELIF


def test_no_lag_where_the_copy_has_them_vllm_wrote_them_or_the_note_names_another_statement():
    assert statement_lag(NEW, gpu_gained(PREV, NEW, stream(method_keys(NEW))), NOTE) == []        # the copy has it
    assert gpu_gained(PREV, NEW, stream(method_keys(PREV)), stream(method_keys(NEW))) == []        # vllm's text
    gained = gpu_gained(PREV, NEW, stream(method_keys(PREV)))
    assert statement_lag(NEW, gained, NOTE.replace("if self.mm and (not self.enc)", "return (ids, embeds)")) == []
    assert statement_lag(NEW, gained, "an omni hunk could not be applied") == []                    # no statement quoted


def test_owed_only_where_a_line_names_omni_s_own_word():
    # made from 0.16's false `sample_tokens` / `_dummy_run`: lines inside the statement that are vllm's change omni
    # followed, or a line the copy writes its own way with the same names, are not omni's unapplied hunk
    gained = gpu_gained(PREV, NEW, stream(method_keys(PREV)))
    assert omni_named(gained, stream(method_keys(PREV))) == ELIF                                     # fires
    assert omni_named(gained, stream(method_keys(PREV)) + stream(["self . model . has_preprocess"])) == []
    assert omni_named([], "") == []
    gate = ["elif getattr ( self . model , 'has_preprocess' , False ) :"]   # a name read by getattr, as a string
    assert omni_named(gate, stream(["self . model"])) == gate
    assert omni_named(gate, stream(["if self . model . has_preprocess :"])) == []


def test_only_statements_omni_inserted_not_lines_it_edited():
    # made from 0.24's false generation `sample_tokens`: omni renamed a name in vllm's `execute_model_state` unpack,
    # a statement the copy writes its own way; an edit of a line PREV had is not read, a new statement is
    assert set(ELIF) == inserted(PREV, NEW)
    renamed = PREV.replace("ids, embeds = None, self.embed(n)", "ids, embeds_raw = None, self.embed(n)")
    assert inserted(PREV, renamed) == set()


def _unapplied(note: str, copy: str) -> list:
    "kept_findings on the update fixtures for one ONP4412 note of `_dummy_run` (the copy's method `copy`)."
    gpu = "vllm_omni.worker.gpu_model_runner.OmniGPUModelRunner"
    r = NS(gpu=gpu, diagnostics=[NS(code="ONP4412", where="_dummy_run", message=note)])
    sides = AuditSides(NS(origin=UPD / "omni_prev"), NS(origin=UPD / "omni_next"), str(UPD / "omni_prev"), "next")
    return kept_findings(r, NS(gpu=gpu), sides, ({"_dummy_run": copy}, {}, {}), ("R", "r.py"), set())


def test_kept_findings_reports_the_unapplied_hunk_the_copy_lacks():
    copy = ("def _dummy_run(self, num_tokens, cudagraph_runtime_mode=None):\n"
            "    hidden = self._model_forward(self.input_ids[:num_tokens], self.positions[:num_tokens])\n"
            "    torch.npu.synchronize()\n    return hidden\n")
    note = "an omni hunk could not be applied: insert `self.last_num_tokens = num_tokens`: no anchor in the NPU method"
    got = _unapplied(note, copy)
    assert [(f.code, f.method, f.detail) for f in got] == [("ONP4132", "_dummy_run",
                                                           ["+ self . last_num_tokens = num_tokens"])]
    caught_up = copy.replace("    return", "    self.last_num_tokens = num_tokens\n    return")
    assert _unapplied(note, caught_up) == []                                          # the copy has it
    assert _unapplied(note.replace("self.last_num_tokens = num_tokens", "return hidden"), copy) == []   # elsewhere
