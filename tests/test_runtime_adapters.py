"""Forward-context, graph and graph-param adapters: translation logic, backend dispatch, and binding to the
real vllm-ascend signatures (read with ast from the PyPI releases, never imported)."""
import inspect
import types
from contextlib import contextmanager

import pytest
import torch

from omni_npu_port.runtime import platform as platform_mod
from omni_npu_port.core.catalog import CATALOG
from omni_npu_port.sources.fetch import fetch_package
from omni_npu_port.sources.readers import open_source
from omni_npu_port.sources.symbols import signature
from omni_npu_port.runtime.forward_context import (ascend_forward_context_call, forward_context, get_forward_context,
                                           light_forward_context)
from omni_npu_port.runtime.graph_params import (capture_seq_lens, paged_attention_seq_lens, should_update_full_graph_params,
                                        update_full_graph_params, update_full_graph_params_kwargs,
                                        using_paged_attention_kwargs)
from omni_npu_port.runtime.graphs import (GraphMode, LightGraphWrapper, batch_execution_kwargs, graph_capture,
                                  graph_wrapper_cls, is_full_mode, is_graph_wrapped, wrap_full)

# The releases the issue names, plus the one where update_full_graph_params changed arity.
RELEASES = ["0.18.0", "0.23.0.post1", "0.25.1rc1"]
GPU_CALL = dict(num_tokens=64, num_tokens_across_dp=None, cudagraph_runtime_mode="FULL", batch_descriptor="bd",
                ubatch_slices=None, slot_mapping=None, is_padding=False)


@pytest.fixture(scope="module", params=RELEASES)
def release(request):
    return request.param, open_source(fetch_package(f"vllm-ascend=={request.param}"))


def _real(tree, record_id):
    sig = signature(tree, CATALOG[record_id].npu_symbol)
    assert sig is not None, f"{CATALOG[record_id].npu_symbol} not found in {tree}"
    return sig


# --- binding to the real signatures -------------------------------------------------------------------------
@pytest.mark.parametrize("call_site,extra", [("dummy_run", {}), ("execute_model", {"scheduled_tokens": 37})])
def test_forward_context_kwargs_bind_to_the_real_signature(release, call_site, extra):
    version, tree = release
    call = ascend_forward_context_call("md", "cfg", vllm_ascend=version, call_site=call_site, model="m", **GPU_CALL, **extra)
    bound = _real(tree, "fc.import").bind(*call.args, **call.kwargs)
    assert bound.arguments["aclgraph_runtime_mode"] == "FULL"
    assert bound.arguments["num_actual_tokens"] == (64 if call_site == "dummy_run" else 37)
    assert bound.arguments["model_instance"] == "m"
    assert ("virtual_engine" in bound.arguments) == ("virtual_engine" in _real(tree, "fc.import").parameters)


def test_update_full_graph_params_kwargs_bind(release):
    version, tree = release
    sig = _real(tree, "gparams.update-full")
    kw = dict(attn_backend="b", update_stream="s", forward_context="fc", num_tokens=8, vllm_config="c", speculative_config=None)
    if "num_dcp_pcp_tokens" in sig.parameters:
        sig.bind(**update_full_graph_params_kwargs(version, num_dcp_pcp_tokens=8, **kw))
    else:
        with pytest.raises(TypeError, match="has no parameter 'num_dcp_pcp_tokens'"):
            update_full_graph_params_kwargs(version, num_dcp_pcp_tokens=8, **kw)
        bound = sig.bind(**update_full_graph_params_kwargs(version, **kw))
        assert "draft_attn_metadatas" not in bound.arguments  # nothing slips into the new last parameter


def test_using_paged_attention_kwargs_bind(release):
    version, tree = release
    sig = _real(tree, "pa.using-paged-attention")
    sig.bind(**using_paged_attention_kwargs(version, 8, "cfg"))
    if "head_size" in sig.parameters:
        sig.bind(**using_paged_attention_kwargs(version, 8, "cfg", head_size=128))
    else:
        with pytest.raises(TypeError, match="head_size"): using_paged_attention_kwargs(version, 8, "cfg", head_size=128)


def test_graph_wrapper_and_capture_calls_bind(release):
    _, tree = release
    init = signature(tree, CATALOG["graph.wrapper-construct"].npu_symbol)  # the class: its __init__ without self
    assert init is not None and list(init.parameters)[:3] == ["runnable", "vllm_config", "runtime_mode"]
    # wrap_full's call shape: (module, vllm_config, runtime_mode=FULL)
    assert init.bind("module", "cfg", runtime_mode="FULL").arguments["runtime_mode"] == "FULL"
    _real(tree, "graph.capture").bind("device")
    assert "force_uniform_decode" in signature(tree, CATALOG["graph.talker-mtp-uniform-decode"].npu_symbol).parameters


# --- NPU dispatch through doubles that carry the real signatures -------------------------------------------
def _double_from(sig, name, body):
    """A function named `<name>_double` with exactly `sig`'s parameters, calling body(bound_arguments)."""
    def double(*args, **kwargs):
        return body(sig.bind(*args, **kwargs).arguments)
    double.__signature__, double.__name__ = sig, f"{name}_double"
    return double


from omni_npu_port.runtime.platform import NpuPlatform  # noqa: E402


class NpuPlatformDouble(NpuPlatform):
    "The NPU platform's hooks on a machine without an NPU: tensors on the CPU."
    supports_graphs = True
    device = torch.device("cpu")


@pytest.fixture
def npu_symbols(monkeypatch, release):
    """Point resolve_symbol at doubles of this release's vllm-ascend functions, recording the calls."""
    version, tree = release
    calls = []

    @contextmanager
    def _ctx(args):
        calls.append(("set_ascend_forward_context", dict(args)))
        yield types.SimpleNamespace(**args)

    symbols = {
        CATALOG["fc.import"].npu_symbol: _double_from(_real(tree, "fc.import"), "set_ascend_forward_context", _ctx),
        CATALOG["gparams.update-full"].npu_symbol: _double_from(
            _real(tree, "gparams.update-full"), "update_full_graph_params", lambda a: calls.append(("update", dict(a)))),
        CATALOG["pa.using-paged-attention"].npu_symbol: _double_from(
            _real(tree, "pa.using-paged-attention"), "using_paged_attention", lambda a: True),
        CATALOG["pa.seq-len-constant"].npu_symbol: 6144,
        CATALOG["graph.wrapper-import"].npu_symbol: type("ACLGraphWrapper_double", (), {}),
    }
    def resolve_double(dotted):
        if dotted not in symbols: raise platform_mod.UnresolvedSymbol(f"cannot resolve {dotted!r} (not installed here)")
        return symbols[dotted]
    monkeypatch.setattr(platform_mod, "resolve_symbol", resolve_double)
    monkeypatch.setenv("OMNI_NPU_PORT_STACK_VLLM_ASCEND", version.replace(".post1", ""))
    return version, calls


def test_forward_context_on_npu_calls_set_ascend_forward_context(npu_symbols):
    version, calls = npu_symbols
    with forward_context("md", "cfg", call_site="dummy_run", model="m", platform=NpuPlatformDouble(), **GPU_CALL) as ctx:
        assert ctx.aclgraph_runtime_mode == "FULL"
    (name, args), = calls
    assert args["num_actual_tokens"] == 64 and args["model_instance"] == "m"


def test_update_full_graph_params_on_npu_follows_the_rule(npu_symbols):
    version, calls = npu_symbols
    fc = types.SimpleNamespace(cudagraph_runtime_mode=GraphMode.FULL, capturing=False)
    kw = dict(attn_backend="b", update_stream="s", num_tokens=8, vllm_config="c")
    assert update_full_graph_params(fc, platform=NpuPlatformDouble(), vllm_ascend=version, **kw)
    assert not update_full_graph_params(fc, use_sparse=True, platform=NpuPlatformDouble(), vllm_ascend=version, **kw)
    capturing = types.SimpleNamespace(cudagraph_runtime_mode=GraphMode.FULL, capturing=True)
    assert not update_full_graph_params(capturing, platform=NpuPlatformDouble(), vllm_ascend=version, **kw)
    assert [c[1]["num_tokens"] for c in calls] == [8]


def test_paged_attention_seq_lens_on_npu(npu_symbols):
    version, _ = npu_symbols
    p = NpuPlatformDouble()
    assert paged_attention_seq_lens(17, 8, "cfg", is_graph_capturing=True, platform=p, vllm_ascend=version) == 6144
    assert paged_attention_seq_lens(17, 8, "cfg", is_graph_capturing=False, platform=p, vllm_ascend=version) == 17


# --- translation logic -----------------------------------------------------------------------------------
def test_forward_context_translation_rules():
    c = ascend_forward_context_call("md", "cfg", vllm_ascend="0.18.0", call_site="dummy_run", **GPU_CALL)
    assert c.renamed == {"cudagraph_runtime_mode": "aclgraph_runtime_mode"}
    assert set(c.dropped) == {"ubatch_slices", "slot_mapping", "is_padding"}
    assert c.kwargs["virtual_engine"] == 0 and "model_instance" not in c.kwargs
    c = ascend_forward_context_call("md", "cfg", vllm_ascend="0.18.0", call_site="dummy_run", virtual_engine=1, num_tokens=2)
    assert c.kwargs["virtual_engine"] == 1
    c = ascend_forward_context_call("md", "cfg", vllm_ascend="0.23.0", call_site="dummy_run", virtual_engine=1, num_tokens=2)
    assert "virtual_engine" not in c.kwargs and c.dropped == ("virtual_engine",)


@pytest.mark.parametrize("kwargs,err", [
    (dict(call_site="prefill", num_tokens=1), "use 'dummy_run' or 'execute_model'"),
    (dict(call_site="execute_model", num_tokens=1), "scheduler_output.total_num_scheduled_tokens"),
    (dict(call_site="dummy_run"), "num_tokens=num_tokens_padded"),
    (dict(call_site="dummy_run", num_tokens=1, num_tokenz=2), "keyword 'num_tokenz'"),
])
def test_forward_context_bad_calls(kwargs, err):
    with pytest.raises((ValueError, TypeError), match=err):
        ascend_forward_context_call("md", "cfg", vllm_ascend="0.23.0", **kwargs)


def test_light_forward_context_nests_and_resets():
    with light_forward_context("a", "cfg", num_tokens=4):
        with light_forward_context("b", "cfg", num_tokens=8, capturing=True):
            assert get_forward_context().attn_metadata == "b" and get_forward_context().capturing
        assert get_forward_context().num_tokens == 4
    with pytest.raises(RuntimeError, match="no forward context"): get_forward_context()


def test_cpu_dispatch_is_light():
    cpu = platform_mod.get_platform("cpu")
    with forward_context("md", "cfg", call_site="dummy_run", platform=cpu, num_tokens=3) as ctx:
        assert ctx is get_forward_context() and ctx.num_tokens == 3
    assert graph_wrapper_cls(cpu) is LightGraphWrapper
    m = torch.nn.Linear(4, 4)
    w = wrap_full(m, platform=cpu)
    assert is_graph_wrapped(w, cpu) and w.runtime_mode.name == "FULL" and w.unwrap() is m
    assert torch.equal(w(torch.ones(1, 4)), m(torch.ones(1, 4))) and w.calls == 1
    assert w.weight is m.weight
    with graph_capture(platform=cpu) as cap:      # no vllm here: the light context on the backend's current stream
        assert type(cap).__name__ == "LightCaptureContext"
        assert type(cap.stream) is type(cpu.current_stream())


def test_full_graph_rule_without_bool():
    fc = types.SimpleNamespace(cudagraph_runtime_mode=GraphMode.FULL, capturing=False)
    assert should_update_full_graph_params(fc)
    assert not should_update_full_graph_params(types.SimpleNamespace(cudagraph_runtime_mode=GraphMode.NONE, capturing=False))
    assert not should_update_full_graph_params(types.SimpleNamespace(cudagraph_runtime_mode=GraphMode.PIECEWISE, capturing=False))
    assert not is_full_mode(None) and GraphMode.FULL_DECODE_ONLY.has_full_cudagraphs()
    assert not should_update_full_graph_params(fc, use_compress=True) and should_update_full_graph_params(fc, use_compress=False)
    assert capture_seq_lens(5, True, True) == CATALOG["pa.seq-len-constant"].value
    assert capture_seq_lens(5, True, False) == 5


def test_batch_execution_kwargs_force_uniform_decode_at_talker_capture():
    assert batch_execution_kwargs(True, num_tokens=2)["force_uniform_decode"] is True
    assert batch_execution_kwargs(False, num_tokens=2) == {"num_tokens": 2}
    with pytest.raises(ValueError, match="force_uniform_decode=True"):
        batch_execution_kwargs(True, force_uniform_decode=False)


# --- the talker-MTP path written once ----------------------------------------------------------------------
def test_talker_mtp_path_on_cpu_matches_the_module():
    from omni_npu_port.runtime.graphs import capture_talker_mtp, load_talker_mtp, run_talker_mtp, talker_mtp_runtime_mode
    from omni_npu_port.bench.talker_mtp import TalkerMTP, TalkerMTPConfig
    cpu = platform_mod.get_platform("cpu")
    mtp = TalkerMTP(TalkerMTPConfig.small(), max_batch=4)
    assert load_talker_mtp(mtp, cudagraph_mode=GraphMode.NONE, platform=cpu) is mtp
    assert talker_mtp_runtime_mode(mtp, GraphMode.FULL, cpu) is GraphMode.NONE
    talker = load_talker_mtp(mtp, cudagraph_mode=GraphMode.FULL, platform=cpu)
    assert is_graph_wrapped(talker, cpu) and talker_mtp_runtime_mode(talker, GraphMode.FULL, cpu) is GraphMode.FULL
    seen = []
    assert capture_talker_mtp(talker, mtp.example_inputs, (2, 1, 4), GraphMode.FULL, platform=cpu,
                              batch_descriptor_for=lambda **kw: seen.append(kw) or kw) == [4, 2, 1]
    assert all(kw["force_uniform_decode"] is True for kw in seen) and [kw["num_tokens"] for kw in seen] == [4, 2, 1]
    inputs = mtp.example_inputs(3, seed=5)
    codes, logits = run_talker_mtp(talker, *inputs, num_tokens_padded=4, cudagraph_mode=GraphMode.FULL, platform=cpu)
    ref_codes, ref_logits = mtp(*inputs)
    assert torch.equal(codes, ref_codes) and torch.allclose(logits, ref_logits)


def test_talker_mtp_forward_context_on_npu(npu_symbols):
    from omni_npu_port.runtime.graphs import run_talker_mtp
    version, calls = npu_symbols
    out = run_talker_mtp(lambda x: x * 2, torch.ones(2), num_tokens_padded=2, cudagraph_mode=GraphMode.FULL,
                         platform=NpuPlatformDouble())
    assert torch.equal(out, torch.full((2,), 2.0))
    (_, args), = calls
    # not wrapped (a plain function) → the card's isinstance check demotes the mode to NONE
    assert args["aclgraph_runtime_mode"] is GraphMode.NONE and args["num_actual_tokens"] == 2


# --- issue 34 part 5: the adapters resolve their release through the one Target resolver and say which one served ----
def test_an_adapter_says_which_release_served_the_one_asked():
    "Fires: 0.99.0 (newer than every release known) is served by the newest, with ONP4307; not for one the table has."
    import warnings
    from omni_npu_port.core.releases import RELEASES as TABLE
    from omni_npu_port.runtime.signatures import TargetWarning
    with pytest.warns(TargetWarning, match="ONP4307 .*newer than every release the table knows"):
        call = ascend_forward_context_call("md", "cfg", vllm_ascend="0.99.0", call_site="dummy_run", num_tokens=4)
    assert (call.asked, call.served_by) == ("0.99.0", TABLE.latest) and call.warning.startswith("ONP4307")
    kw = dict(attn_backend="b", update_stream="s", forward_context="fc", num_tokens=8, vllm_config="cfg")
    with pytest.warns(TargetWarning, match="ONP4307"):
        bound = update_full_graph_params_kwargs("0.99.0", **kw)
    assert bound == kw and (bound.asked, bound.served_by) == ("0.99.0", TABLE.latest) and "ONP4307" in bound.warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # must not fire: a release the table knows serves itself, silently
        known = ascend_forward_context_call("md", "cfg", vllm_ascend="0.18.0", call_site="dummy_run", num_tokens=4)
        assert (known.served_by, known.warning) == ("0.18.0", None)
        assert update_full_graph_params_kwargs("0.23.0", **kw).served_by == "0.23.0"
