"""Audit rule 13 (issue 32, made from the errors of the blind set 0.24): a method omni's GPU runner added that a GPU
method the copy defines calls is not owed where the copy's version of that caller already does most of its statements
in place (ONP4140, a note), and neither is what only it calls (ONP4130). Fixtures: texts written here; nothing fetched."""
import ast

from omni_npu_port.core.diagnostics import code_info
from omni_npu_port.port.audit import DRIFT_CODES, body_shapes, inline_in_copy, run_by_copy


def methods(**texts):
    return {n: ast.parse(t).body[0] for n, t in texts.items()}


# the GPU side moved sample_tokens' output building into a new builder, which calls a new helper of its own
GPU = methods(sample_tokens="def sample_tokens(self, out):\n    self._drain()\n    return self._build_output(out)",
              _build_output=("def _build_output(self, snap):\n    \"\"\"Build the output from a snapshot.\"\"\"\n"
                             "    hs = snap.hidden.to('cpu')\n    payload = self._pool_payload(hs, snap.req_ids)\n"
                             "    self._merge(payload, snap.req_ids)\n    for rid in snap.req_ids:\n"
                             "        payload[rid] = flatten(payload[rid])\n    return make_output(payload, kv=self.kv_out)"),
              _pool_payload="def _pool_payload(self, hs, ids):\n    return {r: {'hidden': hs} for r in ids}",
              _drain="def _drain(self):\n    self.writer.drain_ready()\n    self.writer.flush(timeout=0)")
COPY_INLINE = methods(sample_tokens=(
    "def sample_tokens(self, o):\n    h = o.hidden.to('cpu')\n    p = {r: {'hidden': h} for r in o.req_ids}\n"
    "    self._merge(p, o.req_ids)\n    for r in o.req_ids:\n        p[r] = flatten(p[r])\n"
    "    return make_output(p, kv=self.kv_out)"))
COPY_OWN = methods(sample_tokens="def sample_tokens(self, o):\n    h = o.hidden.to('cpu')\n    return finish(h, self.kv_out)")
ADDED = ["_build_output", "_pool_payload", "_drain"]


def test_the_code_is_a_registered_note():
    info = code_info("ONP4140")
    assert info.tool == "audit" and info.severity == "info" and "ONP4140" not in DRIFT_CODES


def test_body_shapes_leave_out_the_def_the_docstring_and_the_local_names():
    shapes = body_shapes(GPU["_build_output"])
    assert "_ = _ . hidden . to ( 'cpu' )" in shapes and not any("def" in s or "snapshot" in s for s in shapes)


def test_a_new_method_the_copys_caller_does_in_place_is_not_owed():
    assert inline_in_copy("_build_output", GPU, COPY_INLINE) == "sample_tokens"
    # what only it calls is not run by the copy either: rule 7 leaves the helper out (ONP4130)
    inline = {m for m in ADDED if inline_in_copy(m, GPU, COPY_INLINE)}
    assert run_by_copy([m for m in ADDED if m not in inline], GPU, COPY_INLINE) == ["_drain"]


def test_a_new_method_the_copys_caller_holds_little_of_stays_owed():
    assert inline_in_copy("_build_output", GPU, COPY_OWN) is None        # one line of six
    assert inline_in_copy("_drain", GPU, COPY_INLINE) is None             # the copy has none of its lines
    assert run_by_copy(ADDED, GPU, COPY_OWN) == ADDED


def test_only_a_caller_the_copy_defines_counts():
    assert inline_in_copy("_pool_payload", GPU, COPY_INLINE) is None     # its caller is the builder, not copied
    assert inline_in_copy("_build_output", GPU, {}) is None
