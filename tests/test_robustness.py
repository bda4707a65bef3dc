"""The robustness suite (issue 14 part 8): generated programs (hypothesis + hypothesmith) and mutated runner-like files
(cut short, non-UTF-8 bytes, NUL bytes, deep nesting) through translate (`translate_source` and the CLI on tmp files),
port (`port_method` on generated classes) and audit. What must hold: no exception escapes; every output parses;
translating the output again changes nothing; no comment or string is lost or repeated; files without a GPU pattern
come out byte-identical; what CPython rejects is rejected (ONP9001). Sized for CI (about half a minute on 2 cores) and
derandomized (the same examples every run: CI stays reproducible); `benchmarks/robustness.py --fuzz N` explores at
random, longer, and checks comments over real releases."""
import ast
import contextlib
import io
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

hypothesmith = pytest.importorskip("hypothesmith")

from omni_npu_port.cli.main import main  # noqa: E402
from omni_npu_port.port.locate import indent_lines  # noqa: E402  (textwrap.indent splits at \x0c, \x1c-\x1e too)
from omni_npu_port.core.errors import InputError  # noqa: E402
from omni_npu_port.translate.engine import token_changes, translate_source  # noqa: E402
from omni_npu_port.translate.rules import compile_rules  # noqa: E402

FIX = Path(__file__).parent / "fixtures" / "robustness"
RUNNER = (FIX / "gpu_runner.py").read_bytes()
RULES = compile_rules("vllm-ascend==0.18.0")
FILE_ERRORS = {"ONP9001", "ONP9002", "ONP9006"}           # the translator's per-file errors for text it is given
GPU_LINE = "import torch\ntorch.cuda.synchronize()  # a GPU pattern: the pre-filter lets the file in\n"
QUICK = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
# hypothesmith builds its Python grammar on every from_grammar() call (~0.8 s of CPU): one strategy for the tests that
# draw programs, built when the first of them draws (the same examples), not at collection in every test process
PROGRAMS = st.deferred(lambda: hypothesmith.from_grammar("file_input"))


def parses(text) -> bool:
    try: ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError): return False
    return True


def check_translation(src, rules=RULES):
    "Every property of one translation; the Translation."
    t = translate_source(src, rules)                                        # nothing escapes
    if t.error is not None:
        assert t.error.code in FILE_ERRORS, t.error
        assert t.output == src                                              # a skipped file is left as it was
        return t
    if not t.changed and not t.diagnostics:                                  # nothing to do: the file as it was
        assert t.output == src
        return t
    assert parses(src), "CPython rejects the input, the translator translated it"
    assert parses(t.output), "the output does not parse"
    changes = token_changes(src, t.output)
    assert changes is not None and not changes["lost"] and not changes["repeated"], changes
    again = translate_source(t.output, rules)
    assert again.error is None and again.output == t.output, "not idempotent"
    return t


# --- generated programs -----------------------------------------------------------------------------------------------
def placed(program: str, where: str) -> str:
    "A generated program with a GPU pattern before or after it, or indented into a runner method."
    if where == "before": return GPU_LINE + program
    if where == "after": return program.rstrip("\n") + "\n" + GPU_LINE
    return (GPU_LINE + "from vllm.v1.worker.gpu_model_runner import GPUModelRunner\n\nclass R(GPUModelRunner):\n"
            "    def execute_model(self, scheduler_output):\n" + textwrap.indent(program, "        ", lambda l: True)
            + "\n        torch.cuda.synchronize()\n")


@QUICK
@given(PROGRAMS, st.sampled_from(["before", "after", "method"]))
def test_generated_programs_translate_safely(program, where):
    check_translation(placed(program, where))


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(hypothesmith.from_node())
def test_generated_modules_translate_safely(program):
    check_translation(placed(program, "before"))


@QUICK
@given(PROGRAMS)
def test_programs_without_a_gpu_pattern_stay_byte_identical(program):
    data = program.encode("utf-8", "surrogatepass")
    t = translate_source(data, RULES)
    if t.error is None and not t.diagnostics: assert t.output == data


# --- mutations of a runner-like file ------------------------------------------------------------------------------
DEEP = [b"x = " + b"(" * 1000 + b"1" + b")" * 1000,                               # CPython: too many nested parentheses
        b"y = " + b" + ".join([b"torch.cuda.synchronize()"] * 3500),               # 84 KB: CPython's compiler gives up
        b"z = " + b"f(" * 150 + b"torch.cuda.synchronize()" + b")" * 150,        # CPython's, not the translator's
        b"w = " + b" or ".join([b"a"] * 3000)]                                     # flat for CPython, deep for libcst


@st.composite
def mutated(draw, data: bytes = RUNNER):
    "The runner fixture cut short, with a byte replaced or inserted (non-UTF-8, NUL), a line dropped, or deep nesting."
    kind = draw(st.sampled_from(["cut", "byte", "insert", "drop-line", "deep", "tabs"]))
    i = draw(st.integers(0, len(data)))
    if kind == "cut": return data[:i]
    if kind == "byte": return data[:i] + bytes([draw(st.sampled_from([0x00, 0x80, 0xC3, 0xFF, 0x0D, 0x28, 0x22]))]) + data[i + 1:]
    if kind == "insert": return data[:i] + draw(st.sampled_from([b"\0", b"\xff\xfe", b"\r", b"'''", b"(", b"\\"])) + data[i:]
    lines = data.splitlines(keepends=True)
    k = draw(st.integers(0, len(lines) - 1))
    if kind == "drop-line": return b"".join(lines[:k] + lines[k + 1:])
    if kind == "tabs": return b"".join(lines[:k] + [lines[k].replace(b"    ", b"\t")] + lines[k + 1:])
    line = draw(st.sampled_from(DEEP))
    indent = lines[k][:len(lines[k]) - len(lines[k].lstrip())] if lines[k].strip() else b""
    return b"".join(lines[:k] + [indent + line + b"\n"] + lines[k:])


def test_the_fixture_itself_translates_with_every_comment():
    t = check_translation(RUNNER)
    assert t.changed and b"this comment must survive" in t.output and b"the comment of the last kept keyword" in t.output


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(mutated())
def test_mutated_runner_files_translate_safely(data):
    check_translation(data)


DEEP_IDS = ["parens-1000", "chain-84KB", "calls-150", "or-3000"]


@pytest.fixture
def python_as_started(monkeypatch):
    ("Python's default recursion limit and 16 GiB of memory left for the translator, whatever an earlier test left; "
     "restored after.")
    from omni_npu_port.translate import engine
    was = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    monkeypatch.setattr(engine, "memory_headroom", lambda: 16 << 30)
    yield
    sys.setrecursionlimit(was)


def deep_verdict(line: bytes) -> str:
    "The code `translate_source` gives a file with the GPU line and `line`."
    t = translate_source(GPU_LINE.encode() + line + b"\n", RULES)
    assert t.error is not None, f"{line[:40]!r}... was translated"
    return t.error.code


@pytest.mark.parametrize("line", DEEP, ids=DEEP_IDS)
def test_deep_nesting_is_rejected_with_a_code(python_as_started, line):
    assert deep_verdict(line) == ("ONP9006" if line.startswith((b"z", b"w")) else "ONP9001")


@pytest.mark.parametrize("limit,headroom", [(200, 16 << 30), (5000, 16 << 30), (50_000, 1 << 20)])
def test_deep_nesting_verdicts_do_not_depend_on_the_recursion_limit_or_memory_left(monkeypatch, limit, headroom):
    ("A caller that lowered or raised the recursion limit, or has little memory left: each file gets the verdict it "
     "gets in a fresh Python.")
    from omni_npu_port.translate import engine
    monkeypatch.setattr(engine, "memory_headroom", lambda: headroom)
    was = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, engine._frames_in_use() + 50))   # never below what this test already stands on
    try: got = [deep_verdict(line) for line in DEEP]
    finally: sys.setrecursionlimit(was)
    assert got == ["ONP9001", "ONP9001", "ONP9006", "ONP9006"], dict(zip(DEEP_IDS, got))
    assert sys.getrecursionlimit() == was


@pytest.mark.parametrize("end", ["\n\n #\n ", "\n\n  # odd\n", "\n#c\\\n", "\n\t"])
def test_the_end_of_a_file_comes_back_as_it_was(end):   # libcst's round trip loses these (found by the generated programs)
    t = check_translation(GPU_LINE + end)
    assert t.changed and t.output.endswith(end)


def test_a_file_cpython_rejects_outside_the_translated_statements_is_onp9001():
    cut = RUNNER[:RUNNER.rindex(b"return f")] + b"return f(mode,\n"              # cut short after every pattern
    t = translate_source(cut, RULES)
    assert t.error is not None and t.error.code == "ONP9001" and t.output == cut


# --- the CLI on tmp files -----------------------------------------------------------------------------------------
def run(argv):
    "`main(argv)` with its output captured: (exit code, stdout, stderr)."
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err): rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(mutated())
def test_translate_cli_on_a_tree_with_a_mutated_file(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("tree")
    (d / "src").mkdir()
    (d / "src" / "runner.py").write_bytes(data)
    plain = b"# no GPU pattern here\nx = {'a': 1}  # trailing\r\n"
    (d / "src" / "plain.py").write_bytes(plain)
    rc, out, err = run(["translate", str(d / "src"), "-o", str(d / "out")])
    assert rc in (0, 3) and "Traceback" not in out + err, (rc, err)
    assert (d / "out" / "plain.py").read_bytes() == plain                # untouched: byte-identical
    written = d / "out" / "runner.py"
    if written.exists() and written.read_bytes() != data: assert parses(written.read_bytes())
    if rc == 3: assert "runner.py" in out + err                           # the failed file is named


# --- port: generated classes --------------------------------------------------------------------------------------
def triple_file(tmp: Path, extra: str) -> Path:
    "A file with the three classes a method port reads; the omni method carries the generated statements."
    f = tmp / "gen.py"
    f.write_text(
        "class GPUModelRunner:\n    def m(self, x):\n        a = f(x)\n        return a\n\n\n"
        "class OmniGPUModelRunner(GPUModelRunner):\n    def m(self, x):\n        a = f(x)\n"
        + indent_lines(extra, "        ", lambda l: True).rstrip("\n") + "\n        return a\n\n\n"
        "class NPUModelRunner(GPUModelRunner):\n    def m(self, x):\n        a = g(x)\n        return a\n",
        encoding="utf-8")
    return f


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(PROGRAMS)
def test_port_of_a_generated_method(tmp_path_factory, program):
    from omni_npu_port.port import locate
    from omni_npu_port.port.method import port_method
    f = triple_file(tmp_path_factory.mktemp("port"), program)
    assume(parses(f.read_bytes()))
    try: located = [locate.locate(f"{f}:{c}.m") for c in ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")]
    except InputError: return                                               # a clear error is an answer
    res = port_method(*located)
    if not any(d.code == "ONP4006" for d in res.diagnostics):             # ONP4006: the port says it does not compile
        assert parses(textwrap.dedent(res.code)), res.code


SPLITLINES_ONLY = set("\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")   # line breaks to str.splitlines, not to Python


@pytest.mark.parametrize("ch", sorted(SPLITLINES_ONLY))
def test_port_of_a_method_whose_comment_holds_a_splitlines_break(tmp_path, ch):
    "A comment holding a character `str.splitlines` breaks at and Python does not (issue 22, item 5): kept whole."
    from omni_npu_port.port import locate
    from omni_npu_port.port.method import port_method
    f = triple_file(tmp_path, f"#{ch}:\n")
    assert parses(f.read_bytes())
    res = port_method(*[locate.locate(f"{f}:{c}.m") for c in ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")])
    assert f"#{ch}:" in res.code and parses(textwrap.dedent(res.code).encode())


# --- audit: mutated runner files ----------------------------------------------------------------------------------
NPU = (b"from vllm_ascend.worker.model_runner_v1 import NPUModelRunner\n\n\n"
       b"class RobustNPUModelRunner(NPUModelRunner):\n    def _dummy_run(self, num_tokens):\n        return None\n")


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(mutated())
def test_audit_on_a_mutated_runner_file(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("audit")
    (d / "gpu_runner.py").write_bytes(data)
    (d / "npu_runner.py").write_bytes(NPU)
    rc, out, err = run(["audit", "--gpu", str(d / "gpu_runner.py"), "--npu", str(d / "npu_runner.py")])
    assert rc in (0, 1, 2, 3) and "Traceback" not in out + err, (rc, err)   # 2: no runner in it, 3: it cannot be read
    if rc in (2, 3): assert err.count("\n") == 1 and err.startswith("omni-npu-port audit: error: ") and "gpu_runner.py" in err, err
