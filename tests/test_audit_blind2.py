"""Audit rules 21-24 (issue 32, made from the four errors of the blind set 0.31.0rc1 from 0.30.0): a line appended at
a method's end needs no neighbour the copy has; a neighbour the copy calls through another attribute chain is its
place; a base call omni kept, which the port renders anew, is not omni's change; a constant bound to a name nothing
reads has no effect. Fixtures: texts written here; nothing fetched."""
from types import SimpleNamespace as NS

from omni_npu_port.port.audit import (Change, anchors, base_call_kept, base_calls, dead_bindings, owed, reached,
                                      stream)

# the copy lacks `self.report()` (an older lag); omni appends `self.warn(model)` after it
BASE, NEW = ["self . load ( )", "self . report ( )"], ["self . load ( )", "self . report ( )", "self . warn ( model )"]
WARN = Change("add", 3, [], ["        self.warn(model)"])


def test_rule21_appended_at_the_end_is_owed():
    assert anchors(BASE, NEW) == {"self . warn ( model )": []}
    assert owed(WARN, stream(["self . load ( )"]), "", anchors(BASE, NEW)).update == ["        self.warn(model)"]


def test_rule21_must_not_fire_with_a_line_below():
    base, new = BASE + ["return x"], NEW[:2] + ["self . warn ( model )", "return x"]
    assert anchors(base, new) == {"self . warn ( model )": ["self . report ( )", "return x"]}
    assert owed(WARN, stream(["self . load ( )"]), "", anchors(base, new)) is None   # neighbours the copy lacks


CALL = Change("conflict", 5, ["    x = 1"], ["        ids, pos = self._call_prepare(prepare, ids=ids)"])
CALL_ANCHOR = {"ids , pos = self . _call_prepare ( prepare , ids = ids )": ["ids , pos = prepare ( ids = ids )"]}


def test_rule22_neighbour_reached_another_way():
    assert reached("ids , pos = prepare (", stream(["ids , pos = self . model . prepare ( ids = ids )"]))
    got = owed(CALL, stream(["ids , pos = self . model . prepare ( ids = ids )"]), "", CALL_ANCHOR)
    assert got is not None and got.update == CALL.update


def test_rule22_must_not_fire_on_another_callee_or_target():
    assert not reached("ids , pos = prepare (", stream(["ids , pos = self . model . other ( ids )"]))
    assert not reached("ids = prepare (", stream(["pos = self . model . prepare ( ids )"]))
    assert owed(CALL, stream(["ids , pos = self . model . other ( ids = ids )"]), "", CALL_ANCHOR) is None


PORT = "def forward(self, ids):\n    try:\n        out = NPURunner.forward(self, ids)\n    finally:\n        done()\n"
COPY = "def forward(self, ids):\n    run = partial(self.model, ids=ids)\n    out = run()\n"
GPU_PREV = "def forward(self, ids):\n    out = super().forward(ids)\n    return out\n"
GPU_NEW = "def forward(self, ids):\n    try:\n        out = super().forward(ids)\n    finally:\n        done()\n"
BASES = ((None, NS(dotted="vllm.GPURunner")), (None, NS(dotted="vllm_ascend.NPURunner")))


def test_rule23_base_call_omni_kept():
    assert base_calls(PORT, "NPURunner", "forward") == {"out = NPURunner . forward ( self , ids )"}
    assert base_call_kept(BASES, "forward", COPY, PORT, (GPU_PREV, GPU_NEW)) == {
        "out = NPURunner . forward ( self , ids )"}


def test_rule23_must_not_fire_on_omni_new_base_call_or_a_copy_that_calls_it():
    own = "def forward(self, ids):\n    out = self.model(ids)\n    return out\n"   # omni's PREV made no base call
    assert base_call_kept(BASES, "forward", COPY, PORT, (own, GPU_NEW)) == set()
    calls = COPY + "    NPURunner.forward(self, ids)\n"                         # the copy calls the base itself
    assert base_call_kept(BASES, "forward", calls, PORT, (GPU_PREV, GPU_NEW)) == set()


def test_rule24_dead_binding():
    assert dead_bindings("def run(self):\n    randomize = False\n    self.go()\n") == {"randomize = False"}


def test_rule24_must_not_fire_on_a_read_name_or_state():
    assert dead_bindings("def run(self):\n    randomize = False\n    self.go(randomize)\n") == set()
    assert dead_bindings("def run(self):\n    self.flag = False\n") == set()
    assert dead_bindings("def run(self):\n    n = len(self.x)\n") == set()   # not a constant


def test_rule22_must_not_fire_on_the_same_chain():
    # the copy changed the same call (same chain) as the GPU side did: the copy's own update, not the old place
    assert not reached("m = self . model . meta ( r )", stream(["m = self . model . meta ( r , n = n )"]))
