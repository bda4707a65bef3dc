"""Audit rule 32 (issue 32, made from 0.32's miss `NPUARModelRunner._request_needs_downstream_stage_payload`): a plain
assignment the NPU copy wrote its own way still anchors the GPU side's change of its value. Fixtures: texts written
here."""
from omni_npu_port.port.audit import Change, anchors, owed, rewritten, stream

PREV_PORT = ["c = get ( r )", "if s is None :", "return True", "need = s > 0", "return need"]
NEW_PORT = ["c = get ( r )", "if s is None :", "return True", "need = s > getattr ( cfg , 'stage' , 0 )", "return need"]
ADD = Change("add", 4, [], ["    need = s > getattr(cfg, 'stage', 0)"])


def test_a_value_the_copy_set_its_own_way_is_owed_when_the_gpu_side_changes_it():
    own = stream(["c = get ( r )", "need = s is None or s > 0", "return need"])   # no `if`: its own `need`
    assert rewritten("need = s > 0", own)
    assert owed(ADD, own, "", anchors(PREV_PORT, NEW_PORT)).update == ADD.update


def test_no_lag_where_the_copy_sets_no_such_name_or_the_anchor_is_a_call():
    assert owed(ADD, stream(["c = get ( r )", "return c"]), "", anchors(PREV_PORT, NEW_PORT)) is None
    assert not rewritten("need = s > 0", stream(["ok = need = = s"]))       # a comparison sets nothing
    assert not rewritten("need = s > 0", stream(["f ( need = s )"]))       # a keyword argument sets nothing here
    assert not rewritten("need = f ( s )", stream(["need = g ( s )"]))     # a call: rules 4 and 22 decide
    assert not rewritten("self . need = s", stream(["self . need = t"]))  # attributes: not a plain name
