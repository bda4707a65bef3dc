"Issue 24, the fidelity rules: the measure the issue defines (ast-normalised similarity) and the delta's general rules, on fixtures written here."
import ast
import textwrap

import omni_npu_port.port.delta as port_delta
import omni_npu_port.port.merge as port_merge
import omni_npu_port.port.score as port_score

dedent = lambda s: textwrap.dedent(s).lstrip("\n")


# --- the measure: ast-normalised similarity ------------------------------------------------------------------------

def test_ast_similarity_ignores_comments_fences_layout_and_docstrings():
    port = dedent('''
        def f(self, x):
            # ---------------------------------------Omni-new----------------------------------------------
            y = g(x,
                  mode=1)
            # ---------------------------------------Omni-new----------------------------------------------
            # <<<<<<< ONP4001 conflict: NPU base (kept)
            z = npu(y)
            # ======= omni GPU (translated) (commented out)
            # z = gpu(y)
            # >>>>>>>
            return z
    ''')
    hand = dedent('''
        def f(self, x):
            """Mine."""
            y = g(x, mode=1)  # a note
            z = npu(y)
            return z
    ''')
    s = port_score.ast_similarity(port, hand)
    assert s.parsed and s.ratio == 1.0
    assert port_score.similarity(port, hand) < 0.5          # the raw-line measure counts what does not run


def test_ast_similarity_counts_code_and_flags_what_does_not_parse():
    a, b = "def f(self):\n    x = 1\n    return x\n", "def f(self):\n    x = 2\n    return x\n"
    s = port_score.ast_similarity(a, b)
    assert s.parsed and 0 < s.ratio < 1
    markers = "def f(self):\n<<<<<<< NPU\n    x = 1\n=======\n    x = 2\n" + ">" * 7 + " omni\n    return x\n"
    t = port_score.ast_similarity(markers, b)
    assert not t.parsed and t.ratio == port_score.similarity(markers, b)   # raw lines, flagged
    assert port_score.ast_normalised(markers) is None
    assert port_score.ast_normalised('def f():\n    """doc"""\n') == "def f():\n    pass"


# --- a hunk with no place keeps its lines; the hunks that anchor still apply -----------------------------------------

BASE = dedent('''
    def run(self, x):
        a = prep(x)
        with ctx():
            y = f(a)
            z = g(y)
        return z
''')
OMNI = dedent('''
    def run(self, x):
        a = prep(x)
        log_step(x)
        with ctx():
            y = f(a)
            omni_hook(y)
            z = g(y)
        return z
''')
NPU = dedent('''
    def run(self, x):
        a = prep(x)
        stream = npu_stream()
        stream.wait()
        out = self.npu_runner.run_all(a, stream)
        stream.sync()
        npu_log(out)
        npu_record(out)
        npu_flush()
        return out
''')


def test_unplaced_hunk_is_kept_as_a_conflict_at_the_nearest_place():
    d = port_delta.apply_delta(BASE, OMNI, NPU, "run")
    by_kind = {h.kind: h for h in d.hunks}
    assert any(h.kind == "omni" and any("log_step(x)" in l for l in h.lines) for h in d.hunks)   # anchored: applied, live
    gone = [h for h in d.hunks if h.kind == "conflict"]
    assert len(gone) == 1 and gone[0].npu == [] and [l.strip() for l in gone[0].omni] == ["omni_hook(y)"]
    hook = next(h for h in d.delta if any("omni_hook" in ast.unparse(s) for s in h.omni))
    assert hook.status == "not-applied" and "kept as a conflict" in hook.why
    assert any(x.code == "ONP4412" and "omni_hook" in x.message for x in d.diagnostics)
    lines, _ = port_merge.render(d.hunks, prefer="comment")
    code = "\n".join(lines) + "\n"
    compile(code, "<port>", "exec")
    assert "# omni_hook(y)" in code and "log_step(x)" in code
    assert "omni_hook(y)" in port_merge.keep_side(code, 1)       # the omni side holds it: no omni line lost
    assert "conflict" in by_kind


def test_delta_fallback_applies_what_anchors_when_a_hunk_has_no_place():
    line_merge = port_merge.merge_hunks(BASE, OMNI, NPU)
    assert any(h.kind == "conflict" for h in line_merge) and port_delta.drifted_far(BASE, NPU)
    hunks, diags, counts = port_delta.delta_fallback(line_merge, BASE, OMNI, NPU, "run")
    assert counts and not any(x.code == "ONP4414" for x in diags)     # the delta stands, no whole-method fallback
    assert counts["not-applied"] == 1 and counts["applied"] >= 1


# --- omni's deletion deletes on the NPU side too, the NPU base's edits with it ----------------------------------------

DEL_BASE = dedent('''
    def step(self, x):
        h = self.forward(x)
        with post():
            logits = self.head(h)
            out = pack(logits)
        self.state = State(x, out)
        return self.state
''')
DEL_OMNI = dedent('''
    def step(self, x):
        h = self.forward(x)
        self.state = State(x, None)
        return self.state
''')
DEL_NPU = dedent('''
    def step(self, x):
        h = self.forward(x)
        with post():
            logits = self.head(h)
            torch.npu.synchronize()
            out = pack(logits)
            self.state = State(x, out)
        return self.state
''')


def test_omni_deletion_deletes_the_npu_edited_statement_too():
    d = port_delta.apply_delta(DEL_BASE, DEL_OMNI, DEL_NPU, "step")
    code = port_merge.keep_side("\n".join(port_merge.render(d.hunks, prefer="comment")[0]) + "\n", 0)
    tree = ast.parse(code)
    assert "with post()" not in code and "synchronize" not in code          # the NPU version went with omni's deletion
    assert any(x.code == "ONP4416" and "with post()" in x.message for x in d.diagnostics)
    # the statement omni replaced sat inside the deleted NPU block: omni's version is written where the block stood
    assert "self.state = State(x, None)" in [ast.unparse(s) for s in tree.body[0].body]
    assert [ast.unparse(s).split("(")[0] for s in tree.body[0].body] == ["h = self.forward", "self.state = State", "return self.state"]


def test_omni_deletion_keeps_an_npu_binding_a_kept_line_reads():
    npu = DEL_NPU.replace("    return self.state\n", "    npu_log(logits)\n    return self.state\n")
    d = port_delta.apply_delta(DEL_BASE, DEL_OMNI, npu, "step")
    code = port_merge.keep_side("\n".join(port_merge.render(d.hunks, prefer="comment")[0]) + "\n", 0)
    assert "logits = self.head(h)" in code and "npu_log(logits)" in code   # `logits` is read after: its binding stays
    assert not any(x.code == "ONP4416" for x in d.diagnostics)
    assert any(x.code == "ONP4412" and "kept, a kept line reads" in x.message for x in d.diagnostics)


# --- a statement the NPU base moved is no anchor ----------------------------------------------------------------------

def test_an_anchor_the_npu_base_moved_gives_way_to_the_nearest_in_order_sibling():
    base = dedent('''
        def sample(self):
            a = first()
            b = second(a)
            c = third(b)
            kv = self.kv
            self.kv = None
            return build(a, b, kv)
    ''')
    omni = dedent('''
        def sample(self):
            a = first()
            b = second(a)
            c = third(b)
            kv = self.kv
            self.kv = None
            extra = omni_payload(a, c)
            return build(a, b, kv)
    ''')
    npu = dedent('''
        def sample(self):
            kv = self.kv
            self.kv = None
            a = first()
            b = second(a)
            c = third(b)
            npu_sync()
            return npu_build(a, b, kv)
    ''')
    assert "extra = omni_payload(a, c)" in omni
    d = port_delta.apply_delta(base, omni, npu, "sample")
    body = [ast.unparse(s) for s in ast.parse(port_merge.keep_side("\n".join(port_merge.render(d.hunks)[0]) + "\n", 0)).body[0].body]
    assert body.index("extra = omni_payload(a, c)") > body.index("c = third(b)")   # not up where the NPU base moved `self.kv = None`
    hunk = next(h for h in d.delta if h.omni)
    assert hunk.status == "fuzz" and "before `return build(a, b, kv)`" in hunk.why


# --- an anchor the NPU base re-nested: the hunk stays in its own block ------------------------------------------------

def test_a_hunk_anchored_on_a_re_nested_statement_stays_in_its_block():
    base = dedent('''
        def run(self, x):
            check(x)
            if self.ready:
                self.clear()
            y = work(x)
            return y
    ''')
    omni = dedent('''
        def run(self, x):
            check(x)
            if self.ready:
                self.clear()
            omni_prepare(x)
            y = work(x)
            return y
    ''')
    npu = dedent('''
        def run(self, x):
            if self.npu_flag:
                if self.ready:
                    self.clear()
            check(x)
            npu_sync()
            y = npu_work(x)
            return y
    ''')
    d = port_delta.apply_delta(base, omni, npu, "run")
    fn = ast.parse(port_merge.keep_side("\n".join(port_merge.render(d.hunks)[0]) + "\n", 0)).body[0]
    top = [ast.unparse(s).splitlines()[0] for s in fn.body]
    assert "omni_prepare(x)" in top                       # in the method's body, not inside `if self.npu_flag:`
    assert "omni_prepare" not in ast.unparse(fn.body[0])
    hunk = next(h for h in d.delta if h.omni)
    assert hunk.status == "fuzz" and "re-nested" in hunk.why


def test_the_line_merge_stands_where_the_delta_would_hold_no_fewer_omni_lines_in_conflicts():
    "cut_call: the talker block has no place in the NPU method either way; the delta frees nothing, so the line merge stands (ONP4414)."
    import omni_npu_port.port.locate as port_locate
    import omni_npu_port.port.method as port_method
    from pathlib import Path
    fixture = Path(__file__).parent / "fixtures" / "port" / "cut_call.py"
    locs = [port_locate.locate(f"{fixture}:{cls}._dummy_run") for cls in ("GPUModelRunner", "OmniGPUModelRunner", "NPUModelRunner")]
    res = port_method.port_method(*locs)
    assert res.style == "merge" and res.conflicts == 1
    why = next(d for d in res.diagnostics if d.code == "ONP4414").message
    assert "no place" in why and "no fewer omni lines in conflicts" in why


# --- labels, and a rewrite that collides only where it rewrites -------------------------------------------------------

def test_blocks_under_another_label_are_not_versions_of_each_other():
    alike = port_delta.statements_alike
    parse = lambda s: ast.parse(dedent(s)).body[0]
    sample = parse('with record_function("gpu_model_runner: ModelRunnerOutput"):\n    x = 1\n')
    draft = parse('with record_function("draft_token"):\n    y = 2\n')
    assert not alike(sample, draft)
    assert alike(parse('logger.info("Loading model %s", x)'), parse('logger.info("Loading the model %s", x)'))


REW_BASE = dedent('''
    def finish(self, out):
        result = pack(out)
        if not self.async_mode:
            return result
        return wrap(result)
''')
REW_OMNI = dedent('''
    def finish(self, out):
        snapshot = take_snapshot(out)
        builder = make_builder(snapshot)
        if not self.omni_async:
            result = builder()
            if not self.async_mode:
                return result
        return wrap(result)
''')
REW_NPU = dedent('''
    def finish(self, out):
        npu_sync()
        result = pack(out)
        if not self.async_mode:
            npu_record(result)
            return result
        return wrap(result)
''')


def test_a_rewrite_colliding_with_an_npu_edit_leaves_omni_statements_before_it_live():
    d = port_delta.apply_delta(REW_BASE, REW_OMNI, REW_NPU, "finish")
    code = "\n".join(port_merge.render(d.hunks, prefer="comment")[0]) + "\n"
    live = port_merge.keep_side(code, 0)
    assert "snapshot = take_snapshot(out)" in live and "builder = make_builder(snapshot)" in live   # collide with nothing
    assert "npu_record(result)" in live                                                        # the NPU edit stays (its side)
    conflict = next(h for h in d.hunks if h.kind == "conflict")
    assert conflict.omni[0].strip() == "if not self.omni_async:" and not any("take_snapshot" in l for l in conflict.omni)
    compile(code, "<port>", "exec")


def test_no_deletion_removes_an_npu_binding_the_port_still_reads():
    base = dedent('''
        def run(self, x):
            t = prep(x)
            log(t)
            return x
    ''')
    omni = dedent('''
        def run(self, x):
            return x
    ''')
    npu = dedent('''
        def run(self, x):
            t = prep(x)
            log(t)
            npu_use(t)
            return x
    ''')
    d = port_delta.apply_delta(base, omni, npu, "run")
    live = port_merge.keep_side("\n".join(port_merge.render(d.hunks)[0]) + "\n", 0)
    assert "t = prep(x)" in live and "npu_use(t)" in live        # `t` is still read: its binding stays
    assert any(h.status == "not-applied" and "kept, a kept line reads" in h.why for h in d.delta)
