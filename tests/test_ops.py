"runtime.ops (parity with the native path), the code-predictor subject (op counts, parity), the catalog's `ops` records against torch-npu wheels, and `bench --mode`."
import json

import pytest
import torch

import torch_npu_double
from omni_npu_port.bench.code_predictor import CodePredictor, from_talker_mtp, sample_codes
from omni_npu_port.bench.modes import MODES, OpCounter, count_ops, run_modes
from omni_npu_port.bench.talker_mtp import TalkerMTP, TalkerMTPConfig
from omni_npu_port.cli.main import main
from omni_npu_port.core.catalog import CATALOG, TORCH_NPU_PINS
from omni_npu_port.runtime import ops as rops
from omni_npu_port.runtime.platform import PLATFORMS, get_platform
from omni_npu_port.sources.op_schemas import check_op_record, check_ops, ops_failed, read_op_schemas

NPU_DOUBLE = rops.npu_ops(torch_npu_double.resolve)
# full layer and group counts (what the op count depends on), small widths (what the time depends on)
COUNT_CFG = TalkerMTPConfig.small(num_layers=5, num_code_groups=16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("opset", ["torch", "npu-double"])
def test_every_fast_path_agrees_with_the_native_one(opset, dtype):
    ops = rops.torch_ops() if opset == "torch" else NPU_DOUBLE
    d = rops.parity(ops, dtype)
    assert set(d) == set(rops.OP_NAMES) and all(v <= rops.PARITY_TOL[dtype] for v in d.values()), d


def test_ops_are_chosen_once_through_the_platform_hook():
    cpu = get_platform("cpu")
    assert rops.ops_for(cpu) is rops.ops_for(cpu) and rops.ops_for(cpu).name == "torch"
    assert rops.ops_for(cpu, "native") is rops.NATIVE
    assert {n: P.compute_ops for n, P in PLATFORMS.items()} == {"npu": "npu", "cuda": "cuda", "cpu": "torch"}

    class Odd(type(cpu)): compute_ops = "tpu"
    with pytest.raises(ValueError, match="compute_ops"):
        rops.ops_for(Odd())


def test_gqa_attention_does_not_repeat_kv_in_memory():
    q, k = torch.randn(1, 8, 4, 16), torch.randn(1, 8, 2, 16)
    with OpCounter() as c: rops.attention_native(q, k, k)
    if rops.HAS_ENABLE_GQA: assert not any("repeat" in o or "expand" in o or "clone" in o for o in c.ops), c.ops
    with pytest.raises(ValueError, match="multiple"):
        rops.attention_native(torch.randn(1, 8, 3, 16), k, k)


def test_npu_attention_calls_fusion_attention_as_the_record_says():
    calls = []

    def fa(*a, **kw):
        calls.append((a, kw))
        return (rops.attention_native(a[0], a[1], a[2], kw["scale"]),)
    ops = rops.npu_ops(lambda rid: fa if rid == "ops.fusion-attention" else torch_npu_double.resolve(rid))
    q, k = torch.randn(2, 5, 4, 8), torch.randn(2, 5, 2, 8)
    ops.attention(q, k, k)
    (a, kw), = calls
    rec = CATALOG["ops.fusion-attention"]
    assert a[3:] == (4, "BSND") and list(rec.params[:5]) == ["query", "key", "value", "head_num", "input_layout"]
    assert set(kw) == set(rec.params[5:]) and kw["sparse_mode"] == 2 and kw["atten_mask"].shape == (2048, 2048)


@pytest.mark.parametrize("ops", [rops.NATIVE, rops.torch_ops(), NPU_DOUBLE], ids=lambda o: o.name)
def test_code_predictor_equals_the_static_cache_module(ops):
    tm = TalkerMTP(TalkerMTPConfig.small(), max_batch=3)
    x = tm.example_inputs(3, seed=4)
    codes, logits = from_talker_mtp(tm, ops)(*x)
    ref_codes, ref_logits = tm(*x)
    assert torch.equal(codes, ref_codes)
    torch.testing.assert_close(logits, ref_logits, atol=1e-5, rtol=1e-4)


def test_seeded_sampling_is_reproducible_and_respects_top_k_and_top_p():
    logits = torch.tensor([[4.0, 3.0, 0.0, -1.0, -2.0]]).repeat(200, 1)
    u = torch.rand(200, 5, generator=torch.Generator().manual_seed(0))
    k2 = sample_codes(logits, u, top_k=2, top_p=1.0)
    assert set(k2.tolist()) == {0, 1} and torch.equal(k2, sample_codes(logits, u, top_k=2, top_p=1.0))
    assert set(sample_codes(logits, u, top_k=0, top_p=0.5).tolist()) == {0}     # p(code 0) > 0.5: top-p keeps one
    assert torch.equal(sample_codes(logits, None), logits.argmax(-1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_graph_path_dispatches_at_most_a_quarter_of_the_static_cache_modules_ops(dtype):
    "The issue's CPU target, as counts: the NPU graph path (fused ops, torch_npu doubled) vs today's module."
    tm = TalkerMTP(COUNT_CFG, max_batch=2, dtype=dtype)
    x = tm.example_inputs(2)
    today = count_ops(tm, *x)
    npu_path = count_ops(from_talker_mtp(tm, NPU_DOUBLE), *x)
    cpu_path = count_ops(from_talker_mtp(tm, rops.torch_ops()), *x)
    assert npu_path <= today / 4, (npu_path, today)
    assert cpu_path < today, (cpu_path, today)   # CPU has no fused kernels to lean on: fewer ops, not a quarter


# --- the catalog's ops records against torch-npu wheels --------------------------------------------------------

@pytest.mark.parametrize("vllm_ascend", ["0.13.0", "0.18.0", "0.30.0rc2"])
def test_ops_records_hold_on_the_torch_npu_each_release_pins(vllm_ascend):
    rep = check_ops(vllm_ascend)        # fetches the pinned torch-npu wheel into the package cache (PyPI), reads it as a zip
    assert rep["torch_npu"] == TORCH_NPU_PINS[vllm_ascend] and len(rep["results"]) == len(CATALOG.select(family="ops")) == 5
    assert not ops_failed(rep) and all(r["status"] == "ok" for r in rep["results"]), rep["results"]


def test_schema_drift_between_releases_is_found():
    old, new = (read_op_schemas(check_ops(torch_npu=v)["wheel"]) for v in ("2.9.0", "2.10.0.post4"))
    rec = CATALOG["ops.rotary-mul"]
    assert "rotate" not in old["npu_rotary_mul"] and "rotate" in new["npu_rotary_mul"]
    crossed = check_op_record(rec, new, "2.9.0")       # the 2.10 schema where the record expects 2.9's
    assert crossed.status == "drift" and crossed.code == "ONP5101"


def test_doctor_ops_reports_the_pinned_torch_npu(capsys):
    assert main(["doctor", "--ops", "--json", "--source", "vllm-ascend==0.18.0"]) in (0, 1)
    rep = json.loads(capsys.readouterr().out)["ops"]
    assert rep["torch_npu"] == "2.9.0" and {r["status"] for r in rep["results"]} == {"ok"}


# --- modes ---------------------------------------------------------------------------------------------------

def test_bench_mode_cli_writes_every_mode_row(tmp_path, capsys):
    out, png = tmp_path / "m.json", tmp_path / "m.png"
    assert main(["bench", "--device", "cpu", "--small", "--mode", "eager,graph", "--subject", "both", "--batch-sizes", "1",
                 "--iters", "2", "--warmup", "1", "--dtype", "float32", "--json", str(out), "--plot", str(png)]) == 0
    r = json.loads(out.read_text())
    rows = {(x["subject"], x["mode"]): x for x in r["rows"]}
    assert set(rows) == {(s, m) for s in ("code-predictor", "static-kv") for m in ("eager", "graph")}
    assert rows[("code-predictor", "graph")]["status"] == "unavailable" and "no device graphs" in rows[("code-predictor", "graph")]["reason"]
    e = rows[("code-predictor", "eager")]
    assert e["parity"]["ok"] and e["over_roofline"] == pytest.approx(e["p50_ms"] / e["roofline_ms"]) and r["copy_bandwidth_gbs"] > 0
    assert png.read_bytes()[:4] == b"\x89PNG" and "modes on cpu" in capsys.readouterr().out
    assert main(["bench", "--device", "cpu", "--small", "--mode", "warp"]) == 2


@pytest.mark.slow
def test_compiled_modes_agree_with_eager_on_cpu(monkeypatch):
    ("torch.compile's output agrees with eager's, on the smallest code predictor that still loops (one layer, three "
     "code groups: the compile time, minutes on a cold inductor cache, follows the kernels in the graph).")
    small = TalkerMTPConfig.small.__func__
    tiny = classmethod(lambda cls, **kw: small(cls, **{"num_layers": 1, "num_code_groups": 3, **kw}))
    monkeypatch.setattr(TalkerMTPConfig, "small", tiny)
    assert (TalkerMTPConfig.small().num_layers, TalkerMTPConfig.small().num_code_groups) == (1, 3)
    r = run_modes("cpu", modes=("eager", "compiled"), batch_sizes=(1,), iters=2, warmup=1, small=True, dtype="float32")
    c = next(x for x in r["rows"] if x["mode"] == "compiled")
    assert c["status"] == "ok" and c["parity"]["ok"] and c["compile_s"] > 0


@pytest.mark.cuda
def test_cuda_modes_side_by_side():
    try: get_platform("cuda")
    except Exception as e: pytest.skip(str(e))
    r = run_modes("cuda", subjects=("code-predictor",), modes=MODES, batch_sizes=(1,), iters=5, warmup=2, small=True)
    assert all(x["status"] == "ok" and x["parity"]["ok"] for x in r["rows"])


@pytest.mark.slow
def test_cuda_op_set_compiles_and_agrees_with_native_on_any_device():
    "The CUDA set's compiled ops are torch.compile of the native math: they run (slowly to compile) on CPU tensors too."
    ops = rops.cuda_ops()
    d = rops.parity(ops, torch.float32)
    assert all(v <= rops.PARITY_TOL[torch.float32] for v in d.values()), d
    assert all(getattr(f, "state", {}).get("why") is None for f in (ops.add_rms_norm, ops.rotary, ops.swiglu))


@pytest.mark.parametrize("torch_npu", ["2.9.0", "2.10.0.post4"])
def test_the_torch_npu_double_carries_the_wheels_signatures(torch_npu):
    "Every parameter of each double is in the real op's schema, the leading ones at the same positions."
    import dataclasses
    schemas = read_op_schemas(check_ops(torch_npu=torch_npu)["wheel"])
    for rid, op in torch_npu_double.RECORD_OPS.items():
        names = tuple(a.name for a in op._opoverload._schema.arguments)
        r = check_op_record(dataclasses.replace(CATALOG[rid], params=names), schemas, torch_npu)
        assert r.status != "breaks", (rid, r.details)


def test_a_release_without_a_torch_npu_pin_is_a_clear_error(tmp_path):
    from omni_npu_port.sources.op_schemas import SchemaError
    with pytest.raises(SchemaError, match="vllm-ascend main: no torch-npu pin is known.*--source vllm-ascend==X"):
        check_ops("main", cache=tmp_path)
    bad = tmp_path / "torch_npu-1.0.0-py3-none-any.whl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(SchemaError, match="not a readable wheel"):
        read_op_schemas(bad)


def test_modes_benchmark_script_runs_and_checks_targets(tmp_path, capsys):
    from project_scripts import load_script
    script = load_script("benchmarks/code_predictor_modes.py")
    out = tmp_path / "m.json"
    assert script.main(["--device", "cpu", "--small", "--mode", "eager,graph", "--batch-sizes", "1", "--iters", "2",
                        "--warmup", "1", "--dtype", "float32", "--json", str(out), "--quiet"]) == 0
    r = json.loads(out.read_text())
    assert {x["subject"] for x in r["rows"]} == {"code-predictor", "static-kv"}
    printed = capsys.readouterr().out
    assert "ratio to the HBM roofline" in printed and "n/a" in printed
    assert script.main(["--device", "tpu"]) == 2
