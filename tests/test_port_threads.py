"""The port's threads never build `ast` trees at once where CPython cannot (issue 31).

CPython before 3.13 keeps the recursion depth of `ast` construction in interpreter-wide state: two threads parsing
at once can fail with "SystemError: AST constructor recursion depth mismatch" (a judged `port --release` did, once in
nine releases). The batch passes then run in order, and the judge's early check reads a module's imports by tokens.
"""
import sys
import threading

import pytest

from omni_npu_port.port import pipeline
from omni_npu_port.port.judge import _imports_ported
from omni_npu_port.port.pipeline import AST_THREADS, ClassPass, run_batch

PORTED = ["vllm_omni.w.npu_model_runner", "vllm_omni.w.other", "vllm_omni.w.x"]


def test_imports_are_read_by_tokens_in_every_form():
    src = ("from .npu_model_runner import A\n"
           "def f():\n"
           "    from ..w.other import (b as c,\n"
           "        d)  # a comment\n"
           "    import os; import vllm_omni.w.x as y\n")
    assert _imports_ported(src, "vllm_omni.w.npu_ar", PORTED) == set(PORTED)


def test_names_that_are_no_import_are_not_read_as_one():
    src = ("x = 'from vllm_omni.w.other import b'\n"
           "# import vllm_omni.w.x\n"
           "from . import npu_model_runner as other\n")
    assert _imports_ported(src, "vllm_omni.w.npu_ar", PORTED) == {"vllm_omni.w.npu_model_runner"}


def test_text_that_does_not_tokenize_waits_for_every_ported_module():
    assert _imports_ported("x = (\n", "vllm_omni.w.npu_ar", PORTED) == set(PORTED)


def test_ast_threads_follows_the_interpreter():
    assert AST_THREADS == (sys.version_info >= (3, 13))


@pytest.mark.parametrize("threads", [False, True])
def test_batch_passes_run_beside_each_other_only_where_ast_is_thread_safe(monkeypatch, threads):
    seen = {}
    def record(name):
        def run(ports, ctx):
            seen[name] = threading.current_thread() is threading.main_thread()
        return run
    passes = [ClassPass("a", "a", (), record("a"), batch=True),
              ClassPass("b", "b", (), record("b"), batch=True, waits=True)]
    monkeypatch.setattr(pipeline, "PASSES", passes)
    monkeypatch.setattr(pipeline, "AST_THREADS", threads)
    monkeypatch.setattr(pipeline, "address_space_capped", lambda: False)
    run_batch([], None)
    assert seen == {"a": True, "b": not threads}
