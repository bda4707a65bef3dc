"""Issue 33 part 3: the translator's up-front memory check is an upper bound on the worst shapes, so a file that
passes it never aborts the process (libcst's native parser aborts when an allocation fails); one that would not fit is
ONP9006 (the port's, ONP4304)."""
from pathlib import Path

import pytest

from omni_npu_port.translate.engine import (PARSE_BYTES_PER_BYTE, PARSE_FIXED, bracketed_bytes, nesting_suspect,
                                            parse_estimate, translate_source)

G = "torch.cuda.synchronize()"


def deep(lines: int) -> str:
    "`lines` statements, each a GPU call nested in 60 calls (within the depth the translator accepts)."
    return "import torch\n" + ("x = " + "f(" * 60 + G + ")" * 60 + "\n") * lines


def unary(lines: int) -> str:
    "`lines` statements, each a GPU call behind 200 unary minuses (nesting without brackets)."
    return "import torch\n" + ("x = " + "-" * 200 + G + "\n") * lines


def flat(size: int) -> str:
    "About `size` bytes of one GPU call per line (nothing nests)."
    return "import torch\n" + "torch.cuda.synchronize()\n" * (size // 25)


def test_bracketed_bytes_counts_each_level_and_skips_strings_and_comments():
    assert bracketed_bytes(b"x = 1\n") == 0
    assert bracketed_bytes(b"f(a)\n") == 2                       # `(a` inside one level
    assert bracketed_bytes(b"f(g(a))\n") == 5 + 2                 # `(g(a)` at one level, `(a` once more
    assert bracketed_bytes(b"x = '((('  # (((\n") == 0           # brackets in a string or a comment do not nest
    assert bracketed_bytes(b"f((\n") > 0                         # left open: runs to the end, never negative


def test_the_estimate_grows_with_nesting_and_stays_the_size_term_where_nothing_nests():
    import ast
    def per_byte(data: bytes, tree=None) -> float: return (parse_estimate(data, tree) - PARSE_FIXED) / len(data)
    d, f, u = deep(20).encode(), flat(3000).encode(), unary(20).encode()
    assert per_byte(f) < PARSE_BYTES_PER_BYTE + 200
    assert per_byte(d) > PARSE_BYTES_PER_BYTE * 40                      # measured ~42,600 bytes per byte
    assert per_byte(u) < PARSE_BYTES_PER_BYTE * 2                       # no brackets: the scan alone misses it
    assert per_byte(u, ast.parse(u)) > 13_000                           # its `ast` levels do not (measured ~12,100)


def test_prefix_keyword_chains_are_suspect_and_plain_code_is_not():
    assert nesting_suspect(("x = " + "not " * 90 + "y\n").encode() * 30)
    assert nesting_suspect(("x = " + "lambda: " * 45 + "y\n").encode() * 40)
    assert not nesting_suspect(b"if not x:\n    y = lambda: 1\n" * 100)


def test_a_file_that_fits_is_translated_as_before():
    t = translate_source(deep(2))
    assert t.error is None and t.changed and "torch.npu.synchronize()" in t.output


def _args(tmp_path: Path, src: Path) -> list:
    return ["translate", str(src), "-o", str(tmp_path / "out"), "--target", "vllm-ascend==0.18.0"]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmSize from /proc")
@pytest.mark.parametrize("shape", ["deep", "unary"])
def test_a_worst_shape_the_old_estimate_passed_is_refused_not_fatal(tmp_path, cli_under_rlimit, shape):
    ("A file of a few KB that 700 bytes per byte said fits in 150 MB but whose libcst tree takes about 250 MB aborted "
     "the process (SIGABRT, no message). Now: one ONP9006 line naming the file and what it needs; exit 3, no signal.")
    text = deep(40) if shape == "deep" else unary(80)   # before the fix both ended in SIGABRT (exit 134)
    assert len(text) * 700 < 20 << 20                                  # what the old check asked for
    src = tmp_path / "big.py"; src.write_text(text)
    p = cli_under_rlimit(_args(tmp_path, src), 150, {})
    assert p.returncode == 3, (p.returncode, p.stderr[-2000:])
    [line] = [l for l in p.stderr.splitlines() if "ONP9006" in l]
    assert "big.py" in line and "not enough memory" in line and "MiB" in line


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmSize from /proc")
def test_a_worst_shape_the_estimate_says_fits_is_translated_under_the_cap(tmp_path, cli_under_rlimit):
    "The same shape small enough that the estimate fits the cap: translated, never refused, never aborted."
    src = tmp_path / "small.py"; src.write_text(deep(2))
    assert parse_estimate(src.read_bytes()) < 150 << 20
    p = cli_under_rlimit(_args(tmp_path, src), 300, {})
    assert p.returncode in (0, 1), (p.returncode, p.stderr[-2000:])
    assert "ONP9006" not in p.stderr and "torch.npu" in (tmp_path / "out" / "small.py").read_text()


RELEASE = Path(__file__).parent / "fixtures" / "release"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmSize from /proc")
@pytest.mark.parametrize("lines", [40, 0])
def test_a_runner_module_that_nests_deeply_is_refused_by_the_port_not_fatal(tmp_path, cli_under_rlimit, lines):
    ("The port's check counts brackets too: a runner module with a few KB of GPU calls nested in 60 calls aborted a "
     "port worker under a 150 MB cap (BrokenProcessPool); now it is ONP4304 naming it (exit 1, the other runner "
     "ported, no signal); the same module without them is ported.")
    import shutil
    omni = shutil.copytree(RELEASE / "omni", tmp_path / "omni")
    ar = omni / "vllm_omni" / "worker" / "gpu_ar_model_runner.py"
    body = "".join("        x = " + "f(" * 60 + G + ")" * 60 + "\n" for _ in range(lines))
    ar.write_text(ar.read_text() + f"\n    def nested(self, x):\n{body}        return x\n")
    args = ["port", "--release", f"{omni}@0.97.0", "-o", str(tmp_path / "out"), "--history", "0.17.0",
            *sum((["--source", str(RELEASE / s)] for s in ("vllm", "vllm_ascend", "vllm_old")), [])]
    p = cli_under_rlimit(args, 150, {})
    refused = [l for l in (p.stdout + p.stderr).splitlines() if "ONP4304" in l and "gpu_ar_model_runner.py" in l]
    if lines:
        assert p.returncode == 1 and len(refused) == 1, (p.returncode, p.stderr[-2000:])
        assert "MiB of memory left" in refused[0] and "brackets" in refused[0]
    else:
        assert p.returncode in (0, 1) and not refused, (p.returncode, p.stderr[-2000:])


def test_a_string_literal_counts_as_its_quotes_at_each_level():
    assert bracketed_bytes(b'f("' + b"a" * 500 + b'")\n') == bracketed_bytes(b'f("")\n')
    assert bracketed_bytes(b"f('''a\n" + b"b" * 500 + b"''')\n") == bracketed_bytes(b"f('')\n")
    assert bracketed_bytes(b"f(" + b"a" * 500 + b")\n") > 500           # code bytes still count per level


def _run_file(pieces: int) -> str:
    "One statement: a GPU call, `pieces` adjacent string literals one per line, another GPU call."
    return ("import torch\nx = (torch.cuda.current_device(),\n" + '     "abcdefgh"  # a piece\n' * pieces
            + '     "end",\n     torch.cuda.current_device())\n')


def test_a_long_implicit_concatenation_is_translated_with_its_lines_and_strings_kept():
    from omni_npu_port.translate.rules import compile_rules
    src = _run_file(3000)   # libcst alone: a false syntax error (native parser) or "nests too deeply"
    t = translate_source(src, compile_rules("vllm-ascend==0.18.0"))
    assert t.error is None and t.changed
    assert sorted({d.line for d in t.diagnostics}) == [2, 3004]    # both calls, where the source has them
    out = t.output
    assert out.count('     "abcdefgh"  # a piece\n') == 3000 and "ONPFOLD" not in out


def test_a_short_run_or_a_run_a_rule_reads_is_not_folded():
    from omni_npu_port.translate.engine import FOLD_MIN, fold_string_runs
    from omni_npu_port.translate.rules import compile_rules
    rules = compile_rules("vllm-ascend==0.18.0")
    assert fold_string_runs(_run_file(FOLD_MIN - 2), rules) is None   # with "end": one short of FOLD_MIN
    folded = fold_string_runs(_run_file(FOLD_MIN), rules)
    assert folded is not None and len(folded[0]) == len(_run_file(FOLD_MIN))
    assert folded[0].count("\n") == _run_file(FOLD_MIN).count("\n")
    gpu_text = _run_file(FOLD_MIN).replace('"abcdefgh"', '"torch.cuda.synchronize()"')
    assert fold_string_runs(gpu_text, rules) is None   # a run a rule may act on stays as it is
