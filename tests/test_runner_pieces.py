"""Tests for the runner pieces: attention state and metadata, rotary / SP switches, sampler and input-batch
classes, and the `_dummy_run` / `_model_forward` call adapters.

No vllm or vllm-ascend can run here, so the NPU path is driven by a platform stand-in (`*_platform_double`,
an object with only `.name`) and by pointing `omni_npu_port.runtime.platform.resolve_symbol` at test doubles. The
doubles carry the real parameter lists of vllm-ascend 0.18.0, and `test_doubles_carry_real_signatures` checks
that against the wheel in ~/.cache/omni-npu-port/pkgs (read with `ast`; nothing from it is imported).
"""
from __future__ import annotations

import ast
import enum
import functools
import inspect
import os
import types
import zipfile
from pathlib import Path

import pytest

import omni_npu_port.runtime.platform as plat
from omni_npu_port.runtime.attention import (AttentionState, attention_state_cls, attn_state_for,
                                     build_attention_metadata_kwargs, call_build_attention_metadata)
from omni_npu_port.core.catalog import CATALOG, VLLM_ASCEND_VERSIONS, parse_version
from omni_npu_port.runtime.rotary_sp import enable_sp, lmhead_tp_enable, update_cos_sin
from omni_npu_port.runtime.sampler_batch import RunnerClassUnavailable, input_batch_cls, sampler_cls
from omni_npu_port.runtime.signatures import (UnsupportedKeyword, UnsupportedVersion, bind_for_version, call_dummy_run,
                                      call_model_forward, dummy_run_kwargs, model_forward_kwargs, target_version)
import omni_npu_port.runtime.sampler_batch as sampler_batch

PKGS = Path(os.environ.get("OMNI_NPU_PORT_PKGS", Path.home() / ".cache" / "omni-npu-port" / "pkgs"))
WHEEL_VERSION = "0.18.0"

from omni_npu_port.runtime.platform import CpuPlatform, CudaPlatform, NpuPlatform   # the real classes: constructing one needs no device
npu_platform_double = NpuPlatform()
cuda_platform_double = CudaPlatform()
cpu_platform_double = CpuPlatform()
OFF_NPU = [cuda_platform_double, cpu_platform_double]


# ---------------------------------------------------------------- doubles with vllm-ascend 0.18.0's signatures

def recording(fn):
    "Record how a runner method double was called (positional args, keywords), then run it."
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        self.calls.append((fn.__name__, args, kwargs))
        return fn(self, *args, **kwargs)
    return wrapper


class NPUModelRunnerDouble:
    "vllm_ascend.worker.model_runner_v1.NPUModelRunner's three methods, with 0.18.0's parameters."
    def __init__(self): self.calls = []

    @recording
    def _dummy_run(self, num_tokens, with_prefill=False, cudagraph_runtime_mode=None, force_attention=False,
                   uniform_decode=False, is_profile=False, create_mixed_batch=False, allow_microbatching=True,
                   skip_eplb=False, remove_lora=True, is_graph_capturing=False, num_active_loras=0,
                   profile_seq_lens=None):
        return dict(locals(), self=None)

    @recording
    def _model_forward(self, num_tokens_padded, input_ids=None, positions=None, intermediate_tensors=None,
                       inputs_embeds=None, **model_kwargs):
        return dict(locals(), self=None)

    @recording
    def _build_attention_metadata(self, num_tokens, num_reqs, max_query_len, num_tokens_padded=None,
                                  num_reqs_padded=None, ubatch_slices=None, logits_indices=None, use_spec_decode=False,
                                  for_cudagraph_capture=False, num_scheduled_tokens=None, num_scheduled_tokens_np=None,
                                  cascade_attn_prefix_lens=None):
        return dict(locals(), self=None)


def update_cos_sin_double(positions):
    update_cos_sin_double.calls.append(positions)

def enable_sp_double(vllm_config=None, enable_shared_expert_dp=False):
    enable_sp_double.calls.append((vllm_config, enable_shared_expert_dp))
    return vllm_config is not None or enable_shared_expert_dp

def lmhead_tp_enable_double():
    return "yes"  # truthy, not a bool: the wrapper must return a bool


class AscendAttentionStateDouble(enum.Enum):
    PrefillNoCache = 0
    PrefillCacheHit = 1
    DecodeOnly = 2
    ChunkedPrefill = 3
    SpecDecoding = 4

class AscendSamplerDouble: pass
class NPUInputBatchDouble: pass
class SamplerDouble: pass        # vllm's Sampler (GPU side; vllm is not read here)
class InputBatchDouble: pass     # vllm's InputBatch


def gpu_runner_double():
    "A runner whose `_dummy_run` / `_model_forward` have vllm's parameter lists, from the records (vllm is not read here)."
    P = inspect.Parameter
    def method(params, required, var_kw=None):
        ps = [P(p, P.POSITIONAL_OR_KEYWORD, **({} if i < required else {"default": None})) for i, p in enumerate(params)]
        sig = inspect.Signature(ps + ([P(var_kw, P.VAR_KEYWORD)] if var_kw else []))
        def call(*args, **kwargs):
            calls.append((args, kwargs))
            return dict(sig.bind(*args, **kwargs).arguments)
        return call
    calls = []
    runner = types.SimpleNamespace(calls=calls)
    runner._dummy_run = method(CATALOG["sig.dummy-run-gpu"].params, 1)
    runner._model_forward = method(CATALOG["sig.model-forward"].params[1:], 0, "model_kwargs")
    runner._build_attention_metadata = lambda **kw: calls.append(((), kw)) or kw
    return runner


NPU_DOUBLES = {
    "rope.update-cos-sin": update_cos_sin_double,
    "sp.enable-sp": enable_sp_double,
    "util.lmhead-tp-enable": lmhead_tp_enable_double,
    "attn.state-import": AscendAttentionStateDouble,
    "sample.sampler": AscendSamplerDouble,
    "batch.input-batch": NPUInputBatchDouble,
}
GPU_DOUBLES = {"sample.sampler": SamplerDouble, "batch.input-batch": InputBatchDouble}


@pytest.fixture(autouse=True)
def isolated(monkeypatch):
    "No backend override or installed vllm-ascend leaks in; resolve_symbol serves only the doubles; fresh call logs."
    for var in ("OMNI_NPU_PORT_RUNTIME_BACKEND", "OMNI_NPU_PORT_STACK_VLLM_ASCEND", "OMNI_NPU_PORT_SETTINGS"):
        monkeypatch.delenv(var, raising=False)
    table = {CATALOG[rid].npu_symbol: obj for rid, obj in NPU_DOUBLES.items()}
    table.update({CATALOG[rid].gpu_symbol: obj for rid, obj in GPU_DOUBLES.items()})
    asked = []
    def resolve_double(dotted):
        asked.append(dotted)
        if dotted not in table: raise plat.UnresolvedSymbol(f"cannot resolve {dotted!r}: no double")
        return table[dotted]
    monkeypatch.setattr(plat, "resolve_symbol", resolve_double)
    monkeypatch.setattr(plat, "package_version", lambda dist: None)
    update_cos_sin_double.calls, enable_sp_double.calls = [], []
    plat.reset_platform()
    yield asked
    plat.reset_platform()


# ---------------------------------------------------------------- the doubles against the real wheel

def _wheel():
    found = sorted(PKGS.glob(f"vllm_ascend-{WHEEL_VERSION}-*.whl"))
    if not found:
        pytest.skip(f"no vllm_ascend-{WHEEL_VERSION} wheel in {PKGS}: pip download --no-deps --only-binary=:all: "
                    f"--python-version 3.11 --platform manylinux_2_24_x86_64 vllm-ascend=={WHEEL_VERSION} -d {PKGS}")
    return zipfile.ZipFile(found[0])

def find_def(zf: zipfile.ZipFile, dotted: str):
    "The ast node (def, class or assignment target) a dotted name names inside the wheel, or None."
    parts, names = dotted.split("."), set(zf.namelist())
    for i in range(len(parts), 0, -1):
        for path in ("/".join(parts[:i]) + ".py", "/".join(parts[:i]) + "/__init__.py"):
            if path in names:
                node, body = ast.parse(zf.read(path)), None
                for attr in parts[i:]:
                    body = node.body
                    node = next((n for n in body if getattr(n, "name", None) == attr), None)
                    if node is None: return None
                return node
    return None

def ast_params(fn: ast.FunctionDef) -> list:
    "(name, default source or None) for each named parameter, then ('**' + name) for **kwargs."
    a = fn.args
    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + [ast.unparse(d) for d in a.defaults]
    out = [(p.arg, d) for p, d in zip(pos, defaults)]
    out += [(p.arg, None if d is None else ast.unparse(d)) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg: out.append(("**" + a.kwarg.arg, None))
    return [x for x in out if x[0] != "self"]

def py_params(fn) -> list:
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.name == "self": continue
        if p.kind is p.VAR_KEYWORD: out.append(("**" + p.name, None)); continue
        out.append((p.name, None if p.default is p.empty else repr(p.default)))
    return out

REAL_SIGNATURES = [
    ("sig.dummy-run", NPUModelRunnerDouble._dummy_run),
    ("sig.model-forward", NPUModelRunnerDouble._model_forward),
    ("attn.build-metadata", NPUModelRunnerDouble._build_attention_metadata),
    ("rope.update-cos-sin", update_cos_sin_double),
    ("sp.enable-sp", enable_sp_double),
    ("util.lmhead-tp-enable", lmhead_tp_enable_double),
]

@pytest.mark.parametrize("rid,double", REAL_SIGNATURES, ids=[r for r, _ in REAL_SIGNATURES])
def test_doubles_carry_real_signatures(rid, double):
    node = find_def(_wheel(), CATALOG[rid].npu_symbol)
    assert isinstance(node, ast.FunctionDef), f"{CATALOG[rid].npu_symbol} is not a function in the {WHEEL_VERSION} wheel"
    assert py_params(double) == ast_params(node)

def test_state_double_and_mirror_match_the_real_enum():
    node = find_def(_wheel(), CATALOG["attn.state-import"].npu_symbol)
    assert isinstance(node, ast.ClassDef)
    real = {t.id: ast.literal_eval(s.value) for s in node.body if isinstance(s, ast.Assign) for t in s.targets}
    assert {m.name: m.value for m in AscendAttentionStateDouble} == real
    assert {m.name: m.value for m in AttentionState} == real
    bases = [ast.unparse(b) for b in node.bases]
    assert bases == ["Enum"] and not issubclass(AttentionState, int)  # a plain Enum, like the real class

@pytest.mark.parametrize("rid", sorted(NPU_DOUBLES) + ["sig.dummy-run", "sig.model-forward", "attn.build-metadata"])
def test_npu_symbols_used_exist_in_the_wheel(rid):
    assert find_def(_wheel(), CATALOG[rid].npu_symbol) is not None, CATALOG[rid].npu_symbol


# ---------------------------------------------------------------- signatures: bind_for_version

DUMMY_RUN = CATALOG["sig.dummy-run"].npu_symbol

def test_bind_for_version_orders_and_binds():
    kw = bind_for_version(DUMMY_RUN, WHEEL_VERSION, uniform_decode=True, num_tokens=8, with_prefill=False)
    assert list(kw) == ["num_tokens", "with_prefill", "uniform_decode"]
    inspect.signature(NPUModelRunnerDouble._dummy_run).bind(None, **kw)

def test_bind_for_version_unknown_keyword_names_version_keyword_and_accepted():
    with pytest.raises(UnsupportedKeyword) as e:
        bind_for_version(DUMMY_RUN, WHEEL_VERSION, num_tokens=8, num_token=8)
    msg = str(e.value)
    assert WHEEL_VERSION in msg and "'num_token'" in msg and "did you mean 'num_tokens'" in msg
    assert all(p in msg for p in CATALOG.params_for(DUMMY_RUN, vllm_ascend=WHEEL_VERSION))

def test_bind_for_version_dropped_keyword_names_replacement():
    with pytest.raises(UnsupportedKeyword, match="num_active_loras") as e:
        bind_for_version(DUMMY_RUN, WHEEL_VERSION, num_tokens=8, activate_lora=True)
    assert "activate_lora" in str(e.value) and WHEEL_VERSION in str(e.value)

def test_bind_for_version_later_parameter_says_since_when():
    rec = CATALOG["sig.dummy-run-profile-cpp"]
    before = [v for v in VLLM_ASCEND_VERSIONS if CATALOG["sig.dummy-run"].holds_for(v) and not rec.holds_for(v)]
    assert before
    with pytest.raises(UnsupportedKeyword, match=f"since {rec.since}"):
        bind_for_version(DUMMY_RUN, before[-1], num_tokens=1, profile_cpp=True)
    assert bind_for_version(DUMMY_RUN, rec.since, profile_cpp=True) == {"profile_cpp": True}

def test_bind_for_version_without_a_record_there():
    early = [v for v in VLLM_ASCEND_VERSIONS if not CATALOG["sig.dummy-run"].holds_for(v)]
    if not early: pytest.skip("sig.dummy-run holds for every known version")
    with pytest.raises(UnsupportedVersion, match=early[0]):
        bind_for_version(DUMMY_RUN, early[0], num_tokens=1)


# ---------------------------------------------------------------- signatures: _dummy_run

GPU_DR = CATALOG["sig.dummy-run-gpu"].params
SENTINELS = tuple(f"<{p}>" for p in GPU_DR)  # a distinct value per GPU position

def test_dummy_run_kwargs_full_gpu_positional_call_binds_to_real_signature():
    kw = dummy_run_kwargs(*SENTINELS, vllm_ascend=WHEEL_VERSION)
    bound = inspect.signature(NPUModelRunnerDouble._dummy_run).bind(None, **kw).arguments
    assert all(bound[p] == f"<{p}>" for p in GPU_DR)  # every value reaches the parameter of its GPU name
    assert bound["with_prefill"] is False

@pytest.mark.parametrize("version", [v for v in VLLM_ASCEND_VERSIONS if parse_version(v) >= parse_version("0.17.0rc1")])
def test_dummy_run_kwargs_only_uses_that_versions_params(version):
    kw = dummy_run_kwargs(*SENTINELS, vllm_ascend=version)
    accepted = CATALOG.params_for(DUMMY_RUN, vllm_ascend=version)
    assert set(kw) <= set(accepted)
    assert set(kw) == set(GPU_DR) | {"with_prefill"}

def test_dummy_run_kwargs_keeps_explicit_with_prefill_and_keywords():
    kw = dummy_run_kwargs(16, with_prefill=True, uniform_decode=True, vllm_ascend=WHEEL_VERSION)
    assert kw == {"num_tokens": 16, "with_prefill": True, "uniform_decode": True}

@pytest.mark.parametrize("args,kwargs,match", [
    ((1,), {"activate_lora": True}, "num_active_loras"),
    ((1, "FULL"), {"cudagraph_runtime_mode": "FULL"}, "multiple values"),
    (tuple(range(len(GPU_DR) + 1)), {}, "at most"),
    ((), {"uniform_decode": True}, "num_tokens"),
])
def test_dummy_run_kwargs_rejects(args, kwargs, match):
    with pytest.raises(TypeError, match=match):
        dummy_run_kwargs(*args, vllm_ascend=WHEEL_VERSION, **kwargs)


# ---------------------------------------------------------------- signatures: _model_forward

def test_model_forward_kwargs_binds_to_real_signature():
    kw = model_forward_kwargs(128, "ids", "pos", inputs_embeds="emb", deepstack="extra")
    bound = inspect.signature(NPUModelRunnerDouble._model_forward).bind(None, **kw).arguments
    assert (bound["num_tokens_padded"], bound["input_ids"], bound["positions"], bound["inputs_embeds"]) == \
           (128, "ids", "pos", "emb")
    assert bound["model_kwargs"] == {"deepstack": "extra"}
    assert list(kw)[0] == CATALOG["sig.model-forward"].params[0]

def test_model_forward_kwargs_rejects():
    with pytest.raises(TypeError, match="at most 4"): model_forward_kwargs(1, 1, 2, 3, 4, 5)
    with pytest.raises(TypeError, match="multiple values"): model_forward_kwargs(1, "ids", input_ids="ids")
    with pytest.raises(TypeError, match="num_tokens_padded"): model_forward_kwargs(1, num_tokens_padded=2)


# ---------------------------------------------------------------- signatures: calling the runner

def test_call_dummy_run_on_npu_is_by_keyword_only():
    runner = NPUModelRunnerDouble()
    out = call_dummy_run(runner, 64, "FULL", False, True, platform=npu_platform_double, vllm_ascend=WHEEL_VERSION)
    (name, args, kwargs), = runner.calls
    assert (name, args) == ("_dummy_run", ())
    assert (out["num_tokens"], out["cudagraph_runtime_mode"], out["uniform_decode"], out["with_prefill"]) == \
           (64, "FULL", True, False)

@pytest.mark.parametrize("platform", OFF_NPU, ids=lambda p: p.name)
def test_call_dummy_run_off_npu_passes_the_gpu_call_through(platform):
    runner = gpu_runner_double()
    out = call_dummy_run(runner, 64, "FULL", uniform_decode=True, platform=platform)
    assert runner.calls == [((64, "FULL"), {"uniform_decode": True})]
    assert out == {"num_tokens": 64, "cudagraph_runtime_mode": "FULL", "uniform_decode": True}

def test_call_dummy_run_targets_installed_then_profile_version(monkeypatch):
    cpp = CATALOG["sig.dummy-run-profile-cpp"].since
    monkeypatch.setenv("OMNI_NPU_PORT_STACK_VLLM_ASCEND", WHEEL_VERSION)
    assert target_version() == WHEEL_VERSION
    with pytest.raises(UnsupportedKeyword, match=WHEEL_VERSION):
        call_dummy_run(NPUModelRunnerDouble(), 1, profile_cpp=True, platform=npu_platform_double)
    monkeypatch.setattr(plat, "package_version", lambda dist: cpp if dist == "vllm-ascend" else None)
    assert target_version() == cpp
    runner = types.SimpleNamespace(_dummy_run=lambda **kw: kw)
    assert call_dummy_run(runner, 1, profile_cpp=True, platform=npu_platform_double)["profile_cpp"] is True

def test_call_dummy_run_uses_the_process_platform(monkeypatch):
    monkeypatch.setenv("OMNI_NPU_PORT_RUNTIME_BACKEND", "cpu")
    runner = gpu_runner_double()
    call_dummy_run(runner, 8, "NONE")
    assert runner.calls == [((8, "NONE"), {})]

def test_call_model_forward_npu_and_elsewhere():
    runner = NPUModelRunnerDouble()
    out = call_model_forward(runner, 32, "ids", "pos", platform=npu_platform_double, extra=1)
    (_, args, kwargs), = runner.calls
    assert args == () and kwargs == {"num_tokens_padded": 32, "input_ids": "ids", "positions": "pos", "extra": 1}
    assert out["model_kwargs"] == {"extra": 1}
    for p in OFF_NPU:
        gpu = gpu_runner_double()
        assert call_model_forward(gpu, 32, "ids", platform=p, extra=1) == {"input_ids": "ids", "model_kwargs": {"extra": 1}}
        assert gpu.calls == [(("ids",), {"extra": 1})]  # num_tokens_padded dropped


# ---------------------------------------------------------------- attention

STATE_CASES = [((None, False), "DecodeOnly"), ((None, True), "DecodeOnly"), (("mtp", True), "SpecDecoding"),
               (("mtp", False), "ChunkedPrefill"), (("eagle", True), "DecodeOnly"), (("eagle3", False), "DecodeOnly")]

@pytest.mark.parametrize("case,expected", STATE_CASES)
def test_attn_state_for(case, expected):
    assert expected in CATALOG["attn.state-values"].value
    assert attn_state_for(*case, platform=cpu_platform_double) is AttentionState[expected]
    assert attn_state_for(*case, platform=npu_platform_double) is AscendAttentionStateDouble[expected]

def test_attention_state_cls_by_backend(isolated):
    assert attention_state_cls(npu_platform_double) is AscendAttentionStateDouble
    assert isolated == [CATALOG["attn.state-import"].npu_symbol]
    for p in OFF_NPU: assert attention_state_cls(p) is AttentionState
    assert {m.name: m.value for m in AttentionState} == CATALOG["attn.state-values"].value

def test_build_attention_metadata_kwargs_bind_to_real_signature():
    kw = build_attention_metadata_kwargs(WHEEL_VERSION, num_tokens=7, num_tokens_padded=8, num_reqs=2,
                                         max_query_len=4, for_cudagraph_capture=True)
    bound = inspect.signature(NPUModelRunnerDouble._build_attention_metadata).bind(None, **kw).arguments
    assert bound["for_cudagraph_capture"] is True and bound["num_tokens_padded"] == 8

def test_build_attention_metadata_kwargs_unknown_keyword():
    with pytest.raises(UnsupportedKeyword) as e:
        build_attention_metadata_kwargs(WHEEL_VERSION, num_tokens=7, num_actual_tokens=7)
    msg = str(e.value)
    assert "'num_actual_tokens'" in msg and WHEEL_VERSION in msg and "cascade_attn_prefix_lens" in msg

def test_call_build_attention_metadata():
    runner = NPUModelRunnerDouble()
    out = call_build_attention_metadata(runner, platform=npu_platform_double, vllm_ascend=WHEEL_VERSION,
                                        num_tokens=7, num_reqs=2, max_query_len=4)
    assert runner.calls[0][1] == () and (out["num_tokens"], out["num_reqs"]) == (7, 2)
    with pytest.raises(UnsupportedKeyword):
        call_build_attention_metadata(runner, platform=npu_platform_double, vllm_ascend=WHEEL_VERSION, bogus=1)
    gpu = gpu_runner_double()
    assert call_build_attention_metadata(gpu, platform=cpu_platform_double, num_tokens=7) == {"num_tokens": 7}


# ---------------------------------------------------------------- rotary / sequence parallel / LM-head TP

@pytest.mark.parametrize("platform", OFF_NPU, ids=lambda p: p.name)
def test_rotary_sp_off_npu(platform, isolated):
    assert update_cos_sin("pos", platform=platform) is False
    assert enable_sp("cfg", True, platform=platform) is False
    assert lmhead_tp_enable(platform=platform) is False
    assert isolated == [] and update_cos_sin_double.calls == []  # nothing from vllm-ascend was looked up

def test_update_cos_sin_on_npu():
    assert update_cos_sin("pos", platform=npu_platform_double) is True
    assert update_cos_sin_double.calls == ["pos"]

def test_enable_sp_on_npu_release():
    assert enable_sp(None, True, platform=npu_platform_double, vllm_ascend=WHEEL_VERSION) is True
    assert enable_sp(None, platform=npu_platform_double, vllm_ascend=WHEEL_VERSION) is False
    assert enable_sp_double.calls == [(None, True), (None, False)]

def test_enable_sp_on_main_rejects_shared_expert_dp():
    main = next(v for v in VLLM_ASCEND_VERSIONS if CATALOG["sp.enable-sp-config"].holds_for(v))
    with pytest.raises(UnsupportedKeyword) as e:
        enable_sp("cfg", True, platform=npu_platform_double, vllm_ascend=main)
    assert main in str(e.value) and "parallel_config.use_sequence_parallel_moe" in str(e.value)
    assert enable_sp_double.calls == []
    assert enable_sp("cfg", platform=npu_platform_double, vllm_ascend=main) is True  # vllm_config only
    assert enable_sp_double.calls == [("cfg", False)]

def test_enable_sp_uses_profile_version(monkeypatch):
    main = next(v for v in VLLM_ASCEND_VERSIONS if CATALOG["sp.enable-sp-config"].holds_for(v))
    monkeypatch.setenv("OMNI_NPU_PORT_STACK_VLLM_ASCEND", main)
    with pytest.raises(UnsupportedKeyword, match="use_sequence_parallel_moe"):
        enable_sp(None, True, platform=npu_platform_double)

def test_lmhead_tp_enable_on_npu_is_bool():
    assert lmhead_tp_enable(platform=npu_platform_double) is True


# ---------------------------------------------------------------- sampler and input batch

def test_sampler_and_batch_on_npu(isolated):
    assert sampler_cls(npu_platform_double) is AscendSamplerDouble
    assert input_batch_cls(npu_platform_double) is NPUInputBatchDouble
    assert isolated == [CATALOG["sample.sampler"].npu_symbol, CATALOG["batch.input-batch"].npu_symbol]

@pytest.mark.parametrize("platform", OFF_NPU, ids=lambda p: p.name)
def test_sampler_and_batch_with_vllm_before_removal(platform, monkeypatch):
    monkeypatch.setattr(sampler_batch, "_installed_vllm", lambda: "0.18.0")
    assert sampler_cls(platform) is SamplerDouble
    assert input_batch_cls(platform) is InputBatchDouble

@pytest.mark.parametrize("platform", OFF_NPU, ids=lambda p: p.name)
def test_sampler_and_batch_errors_off_npu(platform, monkeypatch):
    removed = CATALOG["vllm.v1-runner-removed"].vllm_since
    with pytest.raises(RunnerClassUnavailable, match="pip install") as e:  # no vllm installed here
        sampler_cls(platform)
    assert "not installed" in str(e.value) and removed in str(e.value)
    monkeypatch.setattr(sampler_batch, "_installed_vllm", lambda: removed)
    with pytest.raises(RunnerClassUnavailable, match="vllm.v1-runner-removed"):
        input_batch_cls(platform)

def test_sampler_on_npu_without_vllm_ascend(monkeypatch):
    def resolve_nothing(dotted): raise plat.UnresolvedSymbol(f"cannot resolve {dotted!r}: No module named 'vllm_ascend'")
    monkeypatch.setattr(plat, "resolve_symbol", resolve_nothing)
    monkeypatch.setenv("OMNI_NPU_PORT_STACK_VLLM_ASCEND", WHEEL_VERSION)
    with pytest.raises(RunnerClassUnavailable, match=f"install vllm-ascend=={WHEEL_VERSION}"):
        sampler_cls(npu_platform_double)
