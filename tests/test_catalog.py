"""The catalog covers the translation card, its corrections and the beyond-card patterns, consistently."""
import re
from pathlib import Path

import pytest

from omni_npu_port.core.releases import RELEASES
from omni_npu_port.core.catalog import (CATALOG, FAMILIES, KINDS, PAIRING, VLLM_ASCEND_VERSIONS, VLLM_VERSIONS, Catalog,
                                   Pattern, Release, parse_target, parse_version, resolve_release, resolve_target_spec,
                                   select_target)

# The card's section headings ("## Section / ### Subsection"), as of the card this project grew from.
CARD_SECTIONS = [
    "Import Translations / Forward Context", "Import Translations / Graph Wrapper",
    "Import Translations / Attention State", "Import Translations / Utilities",
    "Context Manager Translations / Forward Context Setup", "Context Manager Translations / Graph Capture Context",
    "Graph Wrapper Usage / Creating Graph Wrapper", "Graph Wrapper Usage / Checking Graph Wrapper Type",
    "Device Operations / Synchronization", "Device Operations / Stream Operations",
    "Attention Metadata / State Setting (NPU-specific)", "Attention Metadata / Building Attention Metadata",
    "Rotary Embedding / Update Cos/Sin Cache", "Sequence Parallelism / Enable SP Check", "Sampler / Sampler Type",
    "Input Batch / Batch Class", "Graph Parameter Updates / Full Graph Params Update (NPU-specific)",
    "Paged Attention Check", "Common Method Signature Differences / _dummy_run Parameters",
    "Common Method Signature Differences / _model_forward Parameters",
]
# The card's quick-reference table: (feature, GPU, NPU).
CARD_TABLE = [
    ("Graph wrapper", "CUDAGraphWrapper", "ACLGraphWrapper"),
    ("Forward context", "set_forward_context", "set_ascend_forward_context"),
    ("Runtime mode param", "cudagraph_runtime_mode", "aclgraph_runtime_mode"),
    ("Device sync", "torch.cuda.synchronize()", "torch.npu.synchronize()"),
    ("Stream", "torch.cuda.Stream", "torch.npu.Stream"),
    ("Current stream", "torch.cuda.current_stream()", "torch.npu.current_stream()"),
    ("Input batch", "InputBatch", "NPUInputBatch"),
    ("Sampler", "Sampler", "AscendSampler"),
    ("Attention state", "N/A", "AscendAttentionState"),
    ("RoPE update", "N/A", "update_cos_sin()"),
]
# The team's shared folder sits beside the checkout (or above a CI copy of it); the first one found is used.
CARD = next((d / "shared" / "reference" / "translation-card.md" for d in Path(__file__).resolve().parents
             if (d / "shared" / "reference" / "translation-card.md").exists()), Path("/nonexistent/translation-card.md"))


def _card_headings(text):
    out, top = [], None
    for line in text.splitlines():
        if line.startswith("## ") and not line.startswith("### "):
            top = line[3:].strip()
            if top != "Quick Reference Table": out.append(top)
        elif line.startswith("### "):
            if out and out[-1] == top: out.pop()
            out.append(f"{top} / {line[4:].strip()}")
    return out


def _card_table(text):
    rows = [l for l in text.split("## Quick Reference Table", 1)[1].splitlines() if l.startswith("|")][2:]
    return [tuple(c.strip().strip("`") for c in r.strip("|").split("|")) for r in rows]


@pytest.mark.skipif(not CARD.exists(), reason="the shared translation card is not beside this checkout")
def test_card_fixture_matches_the_shared_card():
    text = CARD.read_text()
    assert _card_headings(text) == CARD_SECTIONS
    assert _card_table(text) == CARD_TABLE


@pytest.mark.parametrize("section", CARD_SECTIONS)
def test_every_card_section_has_a_record(section):
    assert [p.id for p in CATALOG if p.card_section == section], f"no record for card section {section!r}"


def _tail(s):
    return s.rstrip("()").rsplit(".", 1)[-1]


@pytest.mark.parametrize("feature,gpu,npu", CARD_TABLE)
def test_every_quick_reference_row_has_a_record(feature, gpu, npu):
    def matches(p):
        if p.rename.get(gpu) == npu: return True
        gpu_ok = gpu == "N/A" or (p.gpu_symbol or "").endswith(gpu.rstrip("()"))
        return gpu_ok and (p.npu_symbol or "").rsplit(".", 1)[-1] == _tail(npu)
    assert any(matches(p) for p in CATALOG), f"quick-reference row {feature!r} has no record"


def test_record_sections_are_card_sections():
    assert {p.card_section for p in CATALOG if p.card_section} <= set(CARD_SECTIONS)


# stack-facts §2: each correction must be stated by a record, with what is true.
def test_card_corrections_are_recorded():
    assert CATALOG["graph.capture"].gpu_symbol == "vllm.distributed.parallel_state.graph_capture"
    assert CATALOG["graph.capture"].npu_symbol == "vllm_ascend.worker.model_runner_v1.graph_capture"
    seq = CATALOG["pa.seq-len-constant"]
    assert seq.npu_symbol.startswith("vllm_ascend.worker.model_runner_v1.") and seq.value == 6144
    dr = CATALOG["sig.dummy-run"]
    assert "activate_lora" in dr.drop and "activate_lora" not in dr.params and "num_active_loras" in dr.params
    assert "num_dcp_pcp_tokens" not in CATALOG["gparams.update-full-v025"].params
    assert "num_dcp_pcp_tokens" in CATALOG["gparams.update-full"].params
    assert CATALOG["gparams.if-needed"].since == "0.18.0"
    assert set(CATALOG["fc.drop-gpu-kwargs"].drop) == {"ubatch_slices", "slot_mapping", "is_padding"}
    assert "num_tokens_padded" in CATALOG["fc.num-actual-tokens"].add["num_actual_tokens"]
    assert CATALOG["dev.accelerator-synchronize"].npu_symbol == "torch.npu.synchronize"
    for pid in ("sample.sampler", "batch.input-batch"):
        assert "NPUModelRunner.__init__" in CATALOG[pid].correction
    for p in CATALOG:
        if p.source == "correction": assert p.correction and p.card_section


def test_beyond_card_patterns_are_recorded():
    beyond = {p.id for p in CATALOG if p.source == "beyond-card"}
    assert {"fc.drop-gpu-kwargs", "dev.accelerator-synchronize", "graph.talker-mtp-uniform-decode",
            "sig.explicit-base-call"} <= beyond
    assert all(not CATALOG[i].card_section for i in beyond)


# stack-facts §3: version ranges.
@pytest.mark.parametrize("pid,holds,fails", [
    ("fc.virtual-engine", "0.18.0", "0.19.1rc1"),
    ("fc.has-sinks", "0.20.2rc1", "0.18.0"),
    ("fc.eplb-heat", "0.23.0", "0.20.2rc1"),
    ("graph.wrapper-kwonly", "0.18.0", "0.17.0rc1"),
    ("gparams.update-full", "0.23.0.post1", "0.25.1rc1"),
    ("gparams.update-full-v025", "0.25.1rc1", "0.23.0.post1"),
    ("pa.head-size", "0.23.0", "0.20.2rc1"),
    ("sample.ascend-sampler-async", "0.23.0", "0.25.1rc1"),
    ("sp.enable-sp", "0.25.1rc1", "main"),
    ("sp.enable-sp-config", "main", "0.25.1rc1"),
    ("batch.kv-cache-groups", "0.20.2rc1", "0.18.0"),
    ("sig.dummy-run-profile-seq-lens", "0.18.0", "0.17.0rc1"),
    ("sig.dummy-run-profile-cpp", "0.19.1rc1", "0.18.0"),
    ("fc.has-sinks", "0.26.0rc1", "0.27.1rc1"),
    ("fc.input-ids-removed", "0.27.1rc1", "0.26.0rc1"),
    ("graph.clear-graphs", "0.20.2rc1", "0.21.0rc1"),
    ("graph.clear-graphs", "0.23.0rc1", "0.22.1rc1"),
    ("batch.kv-cache-groups", "0.13.0", "0.14.0rc1"),
    ("fc.signature-v013", "0.13.0rc2", "0.14.0rc1"),
    ("fc.signature-v015", "0.15.0rc1", "0.16.0rc1"),
])
def test_version_ranges(pid, holds, fails):
    assert CATALOG[pid].holds_for(vllm_ascend=holds)
    assert not CATALOG[pid].holds_for(vllm_ascend=fails)


def test_vllm_ranges():
    assert CATALOG["graph.mode-bool"].holds_for(vllm="0.18.0") and not CATALOG["graph.mode-bool"].holds_for(vllm="0.17.0")
    assert CATALOG["vllm.v1-runner-removed"].holds_for(vllm="0.34.0")
    assert not CATALOG["sample.sampler"].holds_for(vllm="0.34.0")


def test_versions_sort_and_pair():
    assert [parse_version(v) for v in VLLM_ASCEND_VERSIONS] == sorted(parse_version(v) for v in VLLM_ASCEND_VERSIONS)
    assert [parse_version(v) for v in VLLM_VERSIONS] == sorted(parse_version(v) for v in VLLM_VERSIONS)
    assert set(PAIRING) <= set(VLLM_ASCEND_VERSIONS)
    assert {v for v, _ in PAIRING.values()} <= set(VLLM_VERSIONS)
    assert PAIRING["0.17.0rc1"] == ("0.17.0", "2.9.0") and PAIRING["main"][0] == "0.27.1"


def test_range_bounds_are_known_versions():
    for p in CATALOG:
        for v in (p.since, p.until, *(b for g in p.gaps for b in g)):
            assert v is None or v in VLLM_ASCEND_VERSIONS, (p.id, v)
        for v in (p.vllm_since, p.vllm_until):
            assert v is None or v in VLLM_VERSIONS, (p.id, v)


def test_records_are_well_formed():
    ids = [p.id for p in CATALOG]
    assert len(ids) == len(set(ids))
    for p in CATALOG:
        assert re.fullmatch(r"[a-z]+\.[a-z0-9-]+", p.id), p.id
        assert p.family in FAMILIES and p.kind in KINDS and p.title and p.gpu and p.npu
        for sym in (p.gpu_symbol, p.npu_symbol):
            assert sym is None or re.fullmatch(r"[A-Za-z_][\w.]*", sym), (p.id, sym)
        if p.kind == "kwargs-change": assert p.rename or p.drop or p.add, p.id
        if p.kind == "constant": assert p.value is not None, p.id
    assert set(CATALOG.families()) == set(FAMILIES)


def test_every_family_notebook_exists():
    nbs = Path(__file__).resolve().parents[1] / "nbs"
    for fam, (_, nb) in FAMILIES.items():
        assert (nbs / nb).exists(), f"family {fam} is documented in {nb}, which is missing"


def test_validation_rejects_bad_records():
    good = dict(id="x.y", family="graphs", title="t", kind="manual", gpu="a", npu="b", source="beyond-card")
    Catalog([Pattern(**good)])
    for bad, msg in [(dict(kind="magic"), "kind"), (dict(family="gpu"), "family"), (dict(source="card"), "card section"),
                     (dict(since="0.23.0", until="0.18.0"), "empty version range"),
                     (dict(source="correction", card_section="Sampler / Sampler Type"), "what the card got wrong")]:
        with pytest.raises(ValueError, match=msg): Catalog([Pattern(**{**good, **bad})])
    with pytest.raises(ValueError, match="duplicate"): Catalog([Pattern(**good), Pattern(**good)])


def test_lookup_and_select_errors():
    with pytest.raises(KeyError, match="dev.synchronize"): CATALOG["dev.synchronise"]
    with pytest.raises(ValueError, match="choose one of: forward-context"): CATALOG.select(family="graph")
    with pytest.raises(ValueError, match="is not a version; known versions: 0.13.0rc2"): parse_target("vllm-ascend==0.nine")
    with pytest.raises(ValueError, match="must look like"): parse_target("torch==2.9.0")


def test_select_target():
    t18 = {p.id for p in select_target("vllm-ascend==0.18.0")}
    t23 = {p.id for p in select_target("vllm-ascend==0.23.0.post1")}
    assert "fc.virtual-engine" in t18 - t23 and "fc.eplb-heat" in t23 - t18
    assert {p.id for p in select_target(None)} == {p.id for p in CATALOG}
    assert all(p.family == "signatures" for p in select_target("vllm==0.17.0", family="signatures"))


def test_to_json_round_trip():
    import json
    recs = json.loads(CATALOG.to_json())
    assert [r["id"] for r in recs] == [p.id for p in CATALOG]
    assert all(r["notebook"] == FAMILIES[r["family"]][1] for r in recs)


def test_symbols_split_into_module_owner_and_leaf():
    from omni_npu_port.core.catalog import Symbol
    s = CATALOG["sig.dummy-run"].npu_sym
    assert (s.module, s.owner, s.leaf) == ("vllm_ascend.worker.model_runner_v1", "NPUModelRunner", "_dummy_run")
    assert (s.package, s.short, str(s)) == ("vllm_ascend", "NPUModelRunner._dummy_run", CATALOG["sig.dummy-run"].npu_symbol)
    assert Symbol.parse("vllm_ascend.compilation.acl_graph.ACLGraphWrapper").owner is None
    assert Symbol.parse("torch_npu") == Symbol("", None, "torch_npu")
    for p in CATALOG:                                    # every name the catalog holds splits and joins back
        for name, sym in ((p.gpu_symbol, p.gpu_sym), (p.npu_symbol, p.npu_sym)):
            assert (sym is None) == (name is None) and (sym is None or sym.dotted == name == str(sym)), p.id
            if sym is not None: assert sym.leaf == name.rsplit(".", 1)[-1]
    with pytest.raises(ValueError, match="not a dotted name"): Symbol.parse("vllm..x")


def test_every_release_pairs_and_pins():
    for v in VLLM_ASCEND_VERSIONS:
        assert v in PAIRING, v
        assert v == "main" or PAIRING[v][1], v


def test_gaps_split_the_range():
    p = CATALOG["graph.clear-graphs"]
    assert p.ranges == [(None, "0.21.0rc1"), ("0.23.0rc1", None)]
    assert [v for v in VLLM_ASCEND_VERSIONS if not p.holds_for(vllm_ascend=v)] == ["0.21.0rc1", "0.22.1rc1"]
    assert p.holds_for() and p.holds_for(vllm="0.18.0") and not p.holds_for(vllm="0.17.0")
    assert CATALOG["fc.import"].ranges == [(None, None)]
    good = dict(id="x.y", family="graphs", title="t", kind="manual", gpu="a", npu="b", source="beyond-card")
    for gaps in [(("0.18.0", "0.16.0rc1"),), (("0.16.0rc1", None),), (("0.13.0rc2", "0.30.0rc2"),)]:
        with pytest.raises(ValueError, match="gap|empty"): Catalog([Pattern(**good, since="0.14.0rc1", until="0.25.1rc1", gaps=gaps)])
    assert '0.21.0rc1' in CATALOG.to_json([p]) and "| … – <0.21.0rc1, 0.23.0rc1 – … |" in __import__(
        "omni_npu_port.core.catalog", fromlist=["records_table"]).records_table([p])


def test_targets_take_any_version():
    assert parse_target("vllm-ascend==0.11.0rc2") == ("vllm-ascend", "0.11.0rc2")
    assert parse_target("vllm-ascend==0.26.0rc1") == ("vllm-ascend", "0.26.0rc1")
    assert parse_target("vllm==0.31.0") == ("vllm", "0.31.0")
    with pytest.raises(ValueError, match="not a version"): parse_target("vllm-ascend==latest")


# "latest" comes from the releases table (package data), never a literal: adding a release keeps these tests true
LATEST = RELEASES.latest
_v = parse_version(LATEST)
NEXT_OF_SERIES = f"{_v.base_version}rc{_v.pre[1] + 1}" if _v.pre else f"{_v.base_version}.post99"   # unknown, same series


@pytest.mark.parametrize("asked,used,says", [
    ("0.23.0.post1", "0.23.0.post1", None),
    ("main", "main", None),
    ("0.11.0rc2", VLLM_ASCEND_VERSIONS[0], "older than the catalog's first release " + VLLM_ASCEND_VERSIONS[0]),
    (NEXT_OF_SERIES, LATEST, "nearest release of the same series"),
    ("0.23.0.post2", "0.23.0.post1", "nearest release of the same series"),
    ("0.28.0.dev3", "0.28.0rc1", "nearest release of the same series"),
    ("0.25.0", "0.24.0rc1", "nearest older release"),
    ("0.99.0", LATEST, "nearest older release"),
    ("9999", LATEST, "nearest older release"),          # the number main sorts as is not main
])
def test_resolve_release_names_every_substitution(asked, used, says):
    got = resolve_release(asked)
    assert got.used == used and got.used in VLLM_ASCEND_VERSIONS
    if says is None: assert got.warning is None
    else: assert says in got.warning and asked in got.warning and used in got.warning


def test_unknown_targets_select_the_release_that_serves_them():
    assert {p.id for p in select_target("vllm-ascend==0.11.0rc2")} == {p.id for p in select_target(f"vllm-ascend=={VLLM_ASCEND_VERSIONS[0]}")}
    assert {p.id for p in select_target(f"vllm-ascend=={NEXT_OF_SERIES}")} == {p.id for p in select_target(f"vllm-ascend=={LATEST}")}
    pkg, rel = resolve_target_spec("vllm==0.12.0")
    assert pkg == "vllm" and rel.used == VLLM_VERSIONS[0] and "older than" in rel.warning
    assert resolve_target_spec("vllm-ascend==0.18.0") == ("vllm-ascend", Release("0.18.0", None))
