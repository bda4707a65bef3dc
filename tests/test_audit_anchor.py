"""Audit rule 14 (issue 32, made from the errors of the blind set 0.24): where PREV's or NEW's port inherits a method
(writes none), the update's lines on it are anchored on the GPU runner's own method, PREV against NEW, so that only the
GPU side's change since PREV, where the copy kept its place or changed the same statement, is owed.
Fixtures: texts written here; nothing fetched."""
from omni_npu_port.port.audit import Change, anchor_pair, anchors, method_keys, owed, stream

GPU_PREV = ("def __init__(self):\n    self.kv = Manager()\n    ARCHS = {\n        'Qwen3Omni',\n        'MiMo',\n    }\n"
            "    if self.arch in ARCHS:\n        self.init_connectors(kv=self.kv)\n    self.cache = {}\n")
GPU_NEW = GPU_PREV.replace("        'MiMo',\n", "        'MiMo',\n        'IndexTTS2',\n")
COPY = stream(method_keys("def __init__(self):\n    self.kv = Manager()\n    self.chunk = True\n    self.cache = {}\n"))
BLOCK = GPU_NEW.splitlines()[2:8]          # the allowlist and its `if`, the conflict's GPU side


def test_the_ports_text_first_else_the_gpu_runners_own():
    gpus = ({"__init__": GPU_PREV}, {"__init__": GPU_NEW})
    assert anchor_pair(({}, {}), gpus, "__init__", "__init__") == (GPU_PREV, GPU_NEW)
    assert anchor_pair(({"__init__": "a"}, {"__init__": "b"}), gpus, "__init__", "__init__") == ("a", "b")
    assert anchor_pair(({"__init__": "a"}, {}), gpus, "__init__", "__init__") == (GPU_PREV, GPU_NEW)
    assert anchor_pair(({}, {}), ({}, {"__init__": GPU_NEW}), "__init__", "__init__") == (None, None)
    assert anchor_pair(({}, {}), ({"old": GPU_PREV}, {"new": GPU_NEW}), "old", "new") == (GPU_PREV, GPU_NEW)


def test_a_name_added_to_a_block_the_copy_never_had_is_not_owed():
    conflict = Change("conflict", 3, ["    self.chunk = True"], BLOCK)
    assert owed(conflict, COPY, "", None) is not None                 # unanchored: the whole block was owed
    assert owed(conflict, COPY, "", anchors(method_keys(GPU_PREV), method_keys(GPU_NEW))) is None


def test_a_line_the_gpu_side_wrote_beside_the_copys_lines_stays_owed():
    new = GPU_PREV.replace("    self.cache = {}\n", "    self.cache = {}\n    self.hook = None\n")
    got = owed(Change("add", 4, [], ["    self.hook = None"]), COPY, "", anchors(method_keys(GPU_PREV), method_keys(new)))
    assert got is not None and got.update == ["    self.hook = None"]
    warm = GPU_PREV.replace("kv=self.kv)\n", "kv=self.kv)\n        self.warm(self.arch)\n")   # inside the block
    copy = stream(method_keys(GPU_PREV))                                 # a copy that has the block: owed
    got = owed(Change("add", 8, [], ["        self.warm(self.arch)"]), copy, "",
               anchors(method_keys(GPU_PREV), method_keys(warm)))
    assert got is not None and got.update == ["        self.warm(self.arch)"]


def test_a_statement_both_sides_changed_is_owed_in_a_conflict():
    prev, new = "def f(self):\n    self.out.pop(rid, None)\n", "def f(self):\n    self.out.pop(rid, [])\n"
    anchor = anchors(method_keys(prev), method_keys(new))
    both = Change("conflict", 2, ["    self.out.pop(rid, self.npu_default)"], ["    self.out.pop(rid, [])"])
    got = owed(both, stream(["self . out . pop ( rid , self . npu_default )"]), "", anchor)
    assert got is not None and got.kind == "conflict" and got.update == ["    self.out.pop(rid, [])"]
    other = Change("conflict", 2, ["    self.log(rid)"], ["    self.out.pop(rid, [])"])   # the copy changed another
    assert owed(other, stream(["self . log ( rid )"]), "", anchor) is None
