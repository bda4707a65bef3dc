"""The translator's fast paths skip only what no rule can act on (issue 33, speed): the pre-filter's `word_needs`
(a device or env anchor word matters only where a "cuda" / NCCL_ string may be), the same condition statement by
statement in the chunker (and only where a `def` is), `words_in` (a function's words read from its nodes, not its
printed code) and `QuietState` (code generation without a generator per node).
Each has fixtures where the fast path must not skip and ones where it skips; all written here."""
import re

import libcst as cst
import pytest

from omni_npu_port.translate.cst_fast import QuietState, codegen, words_in
from omni_npu_port.translate.engine import Translation, _translate, compile_rules, might_apply, translate_source

T18 = "vllm-ascend==0.18.0"


@pytest.fixture(scope="module")
def rules():
    return compile_rules(T18)


# files the pre-filter must let through: each needs a rewrite or a flag, found only through an anchor word
MUST_TRANSLATE = [
    ("nccl name read by getenv", b'import os\n\ndef init():\n    return os.getenv("NCCL_DEBUG")\n', "ONP2030"),
    ("nccl name spelled with an escape", b'import os\n\ndef init():\n    return os.getenv("\\x4eCCL_DEBUG")\n',
     "ONP2030"),
    ("nccl name over a line continuation", b'import os\n\ndef init():\n    return os.getenv("NC\\\nCL_DEBUG")\n',
     "ONP2030"),
    ("cuda device next to getenv", b'import os\nfrom torch import device\n\ndef init():\n'
     b'    os.getenv("RANK")\n    return device("cuda:0")\n', "ONP1031"),
    ("cuda spelled with an escape next to getenv", b'import os\nfrom torch import device\n\ndef init():\n'
     b'    os.getenv("RANK")\n    return device("\\x63uda")\n', "ONP1031"),
    ("device type compared with cuda", b'def pick(dev):\n    return dev.device_type == "cuda"\n', "ONP1030"),
    ("nccl env beside a device_type anchor", b'import os\n\ndef init(dev):\n    kind = dev.device_type\n'
     b'    os.environ["NCCL_DEBUG"] = "INFO"\n', "ONP2030"),
]

# files the pre-filter skips: an anchor word, but nothing any rule acting around it could change or flag
SKIPPED = [
    ("getenv of an ordinary name", b'import os\n\ndef home():\n    return os.getenv("HOME")\n'),
    ("putenv and unsetenv, no nccl", b'import os\n\ndef reset():\n    os.putenv("A", "1")\n    os.unsetenv("B")\n'),
    ("device type compared with npu", b'def pick(dev):\n    return dev.device_type == "npu"\n'),
]


@pytest.mark.parametrize("what,src,code", MUST_TRANSLATE, ids=[m[0] for m in MUST_TRANSLATE])
def test_prefilter_keeps_files_a_rule_acts_on(rules, what, src, code):
    assert might_apply(rules, src) and might_apply(rules, src.decode())
    for chunks in (True, False):   # the chunked and the whole-file path alike
        t = translate_source(src, rules, "w.py", chunks=chunks)
        assert t.parsed and t.error is None
        assert code in [d.code for d in t.diagnostics], (what, chunks)


@pytest.mark.parametrize("what,src", SKIPPED, ids=[s[0] for s in SKIPPED])
def test_prefilter_skips_anchor_words_with_nothing_to_act_on(rules, what, src):
    assert not might_apply(rules, src) and not might_apply(rules, src.decode())
    t = translate_source(src, rules, "w.py")
    assert not t.parsed and not t.changed and not t.diagnostics and t.error is None
    # the whole file translated past the pre-filter: nothing either (the skip loses nothing)
    whole = _translate(Translation("w.py", src, src), rules, True, False)
    assert whole.parsed and not whole.changed and not whole.diagnostics and whole.error is None


# statement by statement (translate.chunking): a word with `word_needs` anchors a top-level statement or class
# member only if it holds a `def` and one of the texts; each file passes the pre-filter through another statement
STATEMENT_ACTS = [   # the statement with the word must still be parsed: the rule acts there
    ("def inside a top-level if", b'import os\nCFG = "cuda"\n\nif os.name:\n    def pick(dev):\n'
     b'        return dev.device_type == "cuda"\n', "ONP1030"),
    ("nested def in a method", b'import os\nCFG = "cuda"\n\nclass W:\n    def init(self):\n        def inner():\n'
     b'            return os.getenv("NCCL_DEBUG")\n        return inner\n', "ONP2030"),
]
STATEMENT_LEFT_OUT = [   # the word is there, but no rule acting around it can act in that statement
    ("module-level getenv of an nccl name", b'import os\nLEVEL = os.getenv("NCCL_DEBUG")\n\n\ndef pick(dev):\n'
     b'    return dev.device_type == "cuda"\n', b"LEVEL"),
    ("class attribute beside a method", b'import os\n\n\nclass W:\n    LEVEL = os.getenv("NCCL_DEBUG")\n\n'
     b'    def pick(self, dev):\n        return dev.device_type == "cuda"\n', b"LEVEL"),
    ("method without the text", b'import os\n\n\nclass W:\n    def kind(self, dev):\n        return dev.device_type\n\n'
     b'    def pick(self, dev):\n        return dev.device_type == "cuda"\n', b"def kind"),
]


def _chosen(rules, src: bytes) -> bytes:
    from omni_npu_port.translate.chunking import chunk_plan, select_statements
    return b"".join(src[a:b] for a, b, f in select_statements(src, chunk_plan(rules)) if f is None)


def _same_as_whole(rules, src: bytes):
    t, w = translate_source(src, rules, "w.py"), translate_source(src, rules, "w.py", chunks=False)
    assert (t.output, [d.to_dict() for d in t.diagnostics]) == (w.output, [d.to_dict() for d in w.diagnostics])
    return t


@pytest.mark.parametrize("what,src,code", STATEMENT_ACTS, ids=[m[0] for m in STATEMENT_ACTS])
def test_statement_with_word_and_text_is_parsed(rules, what, src, code):
    assert code in [d.code for d in _same_as_whole(rules, src).diagnostics]


@pytest.mark.parametrize("what,src,absent", STATEMENT_LEFT_OUT, ids=[m[0] for m in STATEMENT_LEFT_OUT])
def test_statement_without_def_or_text_is_left_out(rules, what, src, absent):
    assert absent not in _chosen(rules, src) and b"def pick" in _chosen(rules, src)
    t = _same_as_whole(rules, src)   # and whole-file translation finds nothing there either
    assert [d.code for d in t.diagnostics] == ["ONP1030"] and t.changed


def test_word_needs_leave_other_words_unconditional(rules):
    "A word that a class declares without `word_needs` is not made conditional by another class declaring it."
    from omni_npu_port.translate.engine import _word_needs
    needs = _word_needs(rules)
    assert needs["getenv"] == frozenset({"cuda", "NCCL_"}) and needs["device_type"] == frozenset({"cuda", "NCCL_"})
    assert all(v is None for w, v in needs.items() if w not in ("device_type", "getenv", "putenv", "unsetenv"))


# words_in must answer as a regex `\bword\b` over the printed code of the node
WORDS = ("getenv", "device_type")
WORD_CASES = [
    ("def f():\n    return os.getenv('X')\n", True),                     # an attribute name
    ("def f():\n    getenv = 1\n", True),                                # a plain name
    ("def f():\n    x = 1  # getenv below\n", True),                     # a trailing comment
    ("def f():\n    # device_type\n    pass\n", True),                   # a comment line in the body
    ("def f(a=(  # device_type\n  1)):\n    pass\n", True),              # a comment inside brackets
    ("def f():\n    return f'{a}device_type{b}'\n", True),               # f-string text
    ("def f():\n    return 'x getenv'\n", True),                         # a string
    ("def f():\n    return my_getenv() + getenv_all + device_types\n", False),   # parts of longer names
    ("def f():\n    return 'getenvs', 'the_device_type'\n", False),       # parts of longer words in strings
    ("def f():\n    return 1\n", False),
]


@pytest.mark.parametrize("src,want", WORD_CASES)
def test_words_in_answers_as_the_printed_code_regex(src, want):
    node = cst.parse_module(src).body[0]
    printed = re.search(r"\b(?:getenv|device_type)\b", cst.Module([]).code_for_node(node)) is not None
    assert printed == want
    assert words_in(node, WORDS) == want


def test_words_in_prints_for_keywords():
    "A keyword is printed by libcst, not held in a node's text: words_in prints the code for it."
    node = cst.parse_module("def f(y):\n    return [x for x in y if x]\n").body[0]
    assert words_in(node, ("if",)) and not words_in(node, ("while",))


def test_quiet_state_prints_what_libcst_prints():
    src = ("@dec\nasync def f(a, /, *b, c: int = (1, 2), **d) -> None:  # c\n"
           "    return [x async for x in a if not x] or {**d} or (lambda: 1)\n\nclass K(B, m=1):\n    x: int\n")
    m = cst.parse_module(src)
    st = QuietState(default_indent=m.default_indent, default_newline=m.default_newline)
    m._codegen(st)
    assert "".join(st.tokens) == m.code == src
    assert codegen(m, m.body) == src.encode()


# --- the anchored gate (s8): text without the anchor words answers False for every function, without a walk -------
from omni_npu_port.translate import engine as _engine, rewrites as _rewrites  # noqa: E402

GATE_SKIPS = [   # a call in a function (the device rules ask `anchored`), and none of the words anywhere in the text
    ("cuda call only", b"import torch\n\ndef f():\n    torch.cuda.synchronize()\n"),
    ("device string without an anchor word", b'import torch\n\ndef f():\n    torch.cuda.synchronize()\n'
     b'    return torch.device("cuda:0")\n'),
    ("getenv spelled otherwise", b'import os\nimport torch\n\ndef f():\n    torch.cuda.synchronize()\n'
     b'    return os.environ.get("NCCL_DEBUG")\n'),
]
GATE_WALKS = [   # one of the words is in the text: the walk decides, and the rule acts
    ("device type compared with cuda", b'def pick(dev):\n    return dev.device_type == "cuda"\n', "ONP1030"),
    ("cuda device next to getenv", b'import os\nfrom torch import device\n\ndef init():\n'
     b'    os.getenv("RANK")\n    return device("cuda:0")\n', "ONP1031"),
]


def _walks(monkeypatch):
    "Count `words_in` walks made for `anchored`."
    calls = []
    real = _rewrites.words_in
    monkeypatch.setattr(_rewrites, "words_in", lambda node, words: calls.append(node) or real(node, words))
    return calls


def _same(a: Translation, b: Translation) -> bool:
    return (a.output, [d.to_dict() for d in a.diagnostics], a.error) == (b.output, [d.to_dict() for d in b.diagnostics],
                                                                         b.error)


@pytest.mark.parametrize("chunks", [True, False])
@pytest.mark.parametrize("what,src", GATE_SKIPS, ids=[w for w, _ in GATE_SKIPS])
def test_gate_skips_the_walk_where_no_word_is_in_the_text(rules, monkeypatch, what, src, chunks):
    calls = _walks(monkeypatch)
    gated = translate_source(src, rules, chunks=chunks)
    assert calls == [] and gated.error is None
    monkeypatch.setattr(_rewrites, "_text_holds", lambda text, words: True)   # no gate: every function walked
    walked = translate_source(src, rules, chunks=chunks)
    assert calls and _same(gated, walked)


@pytest.mark.parametrize("chunks", [True, False])
@pytest.mark.parametrize("what,src,code", GATE_WALKS, ids=[w for w, _, _ in GATE_WALKS])
def test_gate_leaves_it_to_the_walk_where_a_word_is_in_the_text(rules, monkeypatch, what, src, code, chunks):
    calls = _walks(monkeypatch)
    t = translate_source(src, rules, chunks=chunks)
    assert calls and code in [d.code for d in t.diagnostics]


def test_gate_gets_no_text_it_cannot_search_as_ascii(rules, monkeypatch):
    "A whole file in an encoding other than UTF-8: bytes the gate cannot search, so no text; the walk decides."
    seen = []
    real = _engine.translate_module
    monkeypatch.setattr(_engine, "translate_module", lambda *a, **k: seen.append(k.get("text")) or real(*a, **k))
    latin = b'# -*- coding: latin-1 -*-\n# caf\xe9\ndef pick(dev):\n    return dev.device_type == "cuda"\n'
    t = translate_source(latin, rules, chunks=False)
    assert seen == [None] and "ONP1030" in [d.code for d in t.diagnostics]
    seen.clear()
    utf8 = b'def pick(dev):\n    return dev.device_type == "cuda"\n'
    translate_source(utf8, rules, chunks=False)
    assert seen == [utf8]


def test_syntax_check_reads_the_input_whatever_the_edits_are(rules):
    """The check after a chunked translation is of the input outside the chunks, not of the edits: a file whose only
    edit replaces one name by another (an edit that cannot break syntax) still gets ONP9001 for a line CPython
    rejects elsewhere, and no output."""
    good = b"import torch\n\ndef f():\n    torch.cuda.synchronize()\n\ndef g(x):\n    return x\n"
    assert translate_source(good, rules).changed
    bad = good.replace(b"    return x\n", b"    return x +\n")
    t = translate_source(bad, rules)
    assert t.error is not None and t.error.code == "ONP9001" and t.output == bad and t.error.line == 7
