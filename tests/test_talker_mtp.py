"Talker-MTP module (static KV cache) and the bucketed graph runner, on CPU."
import warnings

import pytest
import torch

from omni_npu_port.bench.graph_runner import (BucketStatus, CapturedBucket, Dispatch, GraphRunner, bucket_for,
                                        device_capture, eager_replay_capture, is_oom)
from omni_npu_port.runtime.platform import get_platform
from omni_npu_port.bench.talker_mtp import TalkerMTP, TalkerMTPConfig, parameter_count, reference_forward, repeat_kv

SMALL = TalkerMTPConfig.small()


@pytest.fixture(scope="module")
def model():
    return TalkerMTP(SMALL, max_batch=8)


@pytest.fixture(scope="module")
def cpu():
    return get_platform("cpu")


# --- the module -------------------------------------------------------------------------------------------

def test_full_shapes_are_stack_facts_section_5():
    c = TalkerMTPConfig.full()
    assert (c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim) == (5, 1024, 16, 8, 128)
    assert (c.intermediate_size, c.rms_norm_eps, c.vocab_size, c.num_code_groups) == (3072, 1e-6, 2048, 16)
    assert 130e6 < parameter_count(c) < 160e6


@pytest.mark.parametrize("batch", [1, 3, 8])
def test_static_cache_step_matches_uncached_reference(model, batch):
    model(*model.example_inputs(8, seed=99))               # dirty every cache row first
    inputs = model.example_inputs(batch, seed=batch)
    codes, logits = model(*inputs)
    ref_codes, ref_logits = reference_forward(model, *inputs)
    assert codes.shape == (batch, SMALL.num_code_groups - 1)
    assert torch.equal(codes, ref_codes)
    torch.testing.assert_close(logits, ref_logits, atol=1e-5, rtol=1e-5)


def test_decode_step_positions_one_at_a_time_equal_all_at_once(model):
    x = torch.randn(2, 3, SMALL.hidden_size)
    pos = model.positions[:3]
    together = model.decode_step(x, pos)
    apart = torch.cat([model.decode_step(x[:, i:i + 1], pos[i:i + 1]) for i in range(3)], 1)
    torch.testing.assert_close(apart, together, atol=1e-5, rtol=1e-5)


def test_rows_are_independent_and_weights_come_from_the_seed(model):
    h, c0 = model.example_inputs(4, seed=5)
    codes, _ = model(h, c0)
    again = TalkerMTP(SMALL, max_batch=1)
    assert torch.equal(again(h[2:3], c0[2:3])[0], codes[2:3])
    other = TalkerMTP(TalkerMTPConfig.small(seed=1), max_batch=4)
    assert not torch.equal(other.lm_heads[0].weight, model.lm_heads[0].weight)


def test_batch_larger_than_the_cache_is_an_error(model):
    with pytest.raises(ValueError, match="larger than the KV cache"):
        model(*model.example_inputs(9))


def test_repeat_kv_equals_repeat_interleave():
    x = torch.randn(2, 3, 4, 5)
    assert torch.equal(repeat_kv(x, 3), x.repeat_interleave(3, 1))
    assert repeat_kv(x, 1) is x


# --- the runner -------------------------------------------------------------------------------------------

def test_bucket_is_smallest_at_least_batch():
    buckets = (1, 2, 4, 8, 16, 32)
    assert [bucket_for(n, buckets) for n in (1, 2, 3, 5, 16, 17, 32, 33)] == [1, 2, 4, 8, 16, 32, 32, None]
    with pytest.raises(ValueError):
        bucket_for(0, buckets)


def test_cpu_has_no_graphs_so_runner_runs_eager_and_says_so(model, cpu):
    r = GraphRunner(model, model.example_inputs, (1, 2, 4), platform=cpu)
    st = r.capture()
    assert {s.mode for s in st.values()} == {"eager"} and "cpu" in st[1].reason and not r.graphs
    x = model.example_inputs(3)
    with pytest.warns(UserWarning, match="no device graphs"):
        out = r(*x)
    assert r.last_dispatch.bucket is None and "no device graphs" in r.last_dispatch.reason
    assert torch.equal(out[0], model(*x)[0])


def test_padding_copies_batch_into_bucket_and_outputs_back(model, cpu):
    r = GraphRunner(model, model.example_inputs, (2, 4), platform=cpu, capture=eager_replay_capture)
    r.capture()
    x = model.example_inputs(3, seed=11)
    codes, logits = r(*x)
    assert r.last_dispatch == Dispatch(3, 4)
    static_h, static_c = r.graphs[4].inputs
    assert torch.equal(static_h[:3], x[0]) and torch.equal(static_c[:3], x[1])
    assert codes.shape == (3, SMALL.num_code_groups - 1) and logits.shape[0] == 3
    padded = model(static_h, static_c)                     # the bucket's computation: rows 0..2 come back exactly
    assert torch.equal(codes, padded[0][:3]) and torch.equal(logits, padded[1][:3])
    ref = model(*x)                                         # the unpadded batch: the same rows, up to BLAS blocking
    assert torch.equal(codes, ref[0]) and torch.allclose(logits, ref[1], rtol=1e-5, atol=1e-6)
    codes[:] = -1                                           # outputs are copies, not views of the static buffers
    assert (r.graphs[4].outputs[0][:3] >= 0).all()


def test_oversize_batch_falls_back_to_eager(model, cpu):
    r = GraphRunner(model, model.example_inputs, (1, 2), platform=cpu, capture=eager_replay_capture)
    r.capture()
    x = model.example_inputs(5)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = r(*x)
    assert r.last_dispatch.bucket is None and "larger than the largest captured bucket 2" in r.last_dispatch.reason
    assert any("larger than the largest" in str(m.message) for m in w)
    assert torch.equal(out[0], model(*x)[0])


def test_oom_in_one_bucket_marks_it_failed_and_others_go_on(model, cpu):
    order = []

    def capture(runner, b):
        order.append(b)
        if b == 4: raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return eager_replay_capture(runner, b)

    r = GraphRunner(model, model.example_inputs, (1, 2, 4, 8), platform=cpu, capture=capture)
    st = r.capture()
    assert order == [8, 4, 2, 1]                            # largest first
    assert [st[b].mode for b in (1, 2, 4, 8)] == ["graph", "graph", "failed", "graph"]
    assert "out of memory" in st[4].reason and "batch 4" in st[4].reason
    r(*model.example_inputs(3))
    assert r.last_dispatch.bucket == 8                      # the failed bucket's batches pad to the next captured one


def test_other_capture_errors_propagate(model, cpu):
    def capture(runner, b): raise TypeError("a bug, not memory")
    with pytest.raises(TypeError):
        GraphRunner(model, model.example_inputs, (1,), platform=cpu, capture=capture).capture()


def test_is_oom_recognises_cuda_and_npu_forms():
    assert is_oom(torch.OutOfMemoryError("x"))
    assert is_oom(RuntimeError("NPU out of memory. Tried to allocate 20.00 MiB"))
    assert not is_oom(RuntimeError("shape mismatch")) and not is_oom(ValueError("out of memory"))
    try:                                                    # the capture context's exit error, raised while handling an OOM
        try: raise torch.OutOfMemoryError("CUDA out of memory")
        finally: raise RuntimeError("CUDA error: operation failed due to a previous error during capture")
    except RuntimeError as e:
        assert is_oom(e)


class RecordingPlatformDouble:
    "Double of a graph-capable platform (CUDA/NPU): records the device ops device_capture calls, in order."
    name, supports_graphs, device = "double", True, torch.device("cpu")

    def __init__(self): self.log, self.in_stream, self.pools = [], False, []
    def synchronize(self): self.log.append("sync")
    def Stream(self, **kw): return _StreamDouble(self)
    def current_stream(self): return _StreamDouble(self)
    def stream(self, s): return _Ctx(self, "stream")
    graph_cls = property(lambda self: lambda: _GraphDouble(self))
    def graph(self, g, pool=None, stream=None):
        self.pools.append(pool)
        return _Ctx(self, "capture")
    def graph_pool_handle(self): return object()
    def memory_allocated(self): return 100
    def max_memory_allocated(self): return 160
    def reset_peak_memory_stats(self): self.log.append("reset_peak")
    def empty_cache(self): self.log.append("empty_cache")


class _StreamDouble:
    def __init__(self, p): self.p = p
    def wait_stream(self, other): self.p.log.append("wait_stream")


class _Ctx:
    def __init__(self, p, what): self.p, self.what = p, what
    def __enter__(self): self.p.log.append(f"enter {self.what}")
    def __exit__(self, *a): self.p.log.append(f"exit {self.what}")


class _GraphDouble:
    def __init__(self, p): self.p = p
    def replay(self): self.p.log.append("replay")


def test_device_capture_warms_up_on_a_side_stream_then_captures_in_the_shared_pool():
    p = RecordingPlatformDouble()
    calls = []

    def fn(x):
        calls.append(p.log[-1])
        return x * 2

    r = GraphRunner(fn, lambda b: (torch.ones(b, 3),), (1, 4), platform=p, warmup=2)
    st = r.capture()
    assert r._capture is device_capture and {s.mode for s in st.values()} == {"graph"}
    assert len(p.pools) == 2 and p.pools[0] is p.pools[1] is r.pool is not None
    first = p.log[:p.log.index("exit capture") + 1]
    assert first.index("enter stream") < first.index("exit stream") < first.index("enter capture")
    assert calls[:3] == ["enter stream", "enter stream", "enter capture"]   # 2 warm-ups on the side stream, then capture
    assert st[4].pool_bytes == 60 and st[4].capture_s is not None
    out = r(torch.full((3, 3), 5.0))
    assert p.log[-1] == "replay" and r.last_dispatch == Dispatch(3, 4) and out.shape == (3, 3)
