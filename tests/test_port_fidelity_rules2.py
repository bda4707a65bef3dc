"Issue 24, more fidelity rules of the delta port, on fixtures written here: a compound statement whose header the NPU base rewrote is still the base's."
import ast
import textwrap

import omni_npu_port.port.delta as port_delta
import omni_npu_port.port.merge as port_merge

dedent = lambda s: textwrap.dedent(s).lstrip("\n")

HEAD_BASE = dedent('''
    def run(self, x):
        h = self.forward(x)
        with record("gpu: postprocess"):
            if not self.last_rank:
                return h
            logits = self.head(h[self.idx])
            out = pack(logits, self.state)
        return out
''')
HEAD_OMNI = dedent('''
    def run(self, x):
        h = self.forward(x)
        out = self.generate(h)
        return out
''')
HEAD_NPU = dedent('''
    def run(self, x):
        h = self.forward(x)
        with Profile().capture_async("post process"):
            if not self.last_rank:
                self.debugger.step()
                return h
            logits = self.head(h[self.idx])
            torch.npu.synchronize()
            out = pack(logits, self.state)
        return out
''')


def live(d) -> str:
    return port_merge.keep_side("\n".join(port_merge.render(d.hunks, prefer="comment")[0]) + "\n", 0)


def test_blocks_with_another_header_but_alike_contents_pair():
    base, npu = (ast.parse(t).body[0] for t in (HEAD_BASE, HEAD_NPU))
    pairs = port_delta.pair_in_gaps(base.body, npu.body, port_delta.align(base.body, npu.body))
    assert (1, 1) in pairs and (1, None) not in pairs and (None, 1) not in pairs
    assert port_delta.bodies_alike(base.body[1], npu.body[1])


def test_blocks_with_other_contents_stay_apart():
    npu = ast.parse(HEAD_NPU.replace("logits = self.head(h[self.idx])", "mask = build(mask)")
                    .replace("out = pack(logits, self.state)", "self.cache.clear()")
                    .replace("torch.npu.synchronize()", "flush(self.stream)")
                    .replace("self.debugger.step()", "report()")
                    .replace("return h", "return None")).body[0]
    base = ast.parse(HEAD_BASE).body[0]
    assert not port_delta.bodies_alike(base.body[1], npu.body[1])
    assert (1, 1) not in port_delta.pair_in_gaps(base.body, npu.body, port_delta.align(base.body, npu.body))


def test_omni_deletion_reaches_the_npu_block_with_a_rewritten_header():
    d = port_delta.apply_delta(HEAD_BASE, HEAD_OMNI, HEAD_NPU, "run")
    code = live(d)
    body = [ast.unparse(s) for s in ast.parse(code).body[0].body]
    assert "capture_async" not in code and "synchronize" not in code      # the NPU version went with omni's deletion
    assert body == ["h = self.forward(x)", "out = self.generate(h)", "return out"]
    assert any(x.code == "ONP4416" for x in d.diagnostics)              # the NPU edits dropped with it are named


def test_a_block_the_npu_base_wrapped_in_another_statement_pairs_with_the_inner_one():
    base = ast.parse(dedent('''
        def run(self, x):
            h = self.forward(x)
            with record("prep"), self.sync():
                a = prep(x)
                b = other(a)
                c = third(b)
            return c
    ''')).body[0]
    npu = ast.parse(dedent('''
        def run(self, x):
            h = self.forward(x)
            with record("prepare input"):
                with self.sync():
                    a = prep(x)
                    b = other(a)
                    c = third(b)
            return c
    ''')).body[0]
    assert not port_delta.bodies_alike(base.body[1], npu.body[1])     # the outer one holds the block one level deeper
    assert (1, 1) not in port_delta.pair_in_gaps(base.body, npu.body, port_delta.align(base.body, npu.body))
    stmts, _ = port_delta.npu_map(base, npu)
    paired = {ast.unparse(z): ast.unparse(n) for n, _, z in stmts.values()}
    assert paired["a = prep(x)"] == "a = prep(x)" and "self.sync()" in [ast.unparse(n.items[0].context_expr) for n, _, z in stmts.values()
                                                                       if isinstance(n, ast.With) and isinstance(z, ast.With)]
