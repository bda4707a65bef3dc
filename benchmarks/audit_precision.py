"""Precision and recall of `omni-npu-port audit` on a labelled set built from consecutive vLLM-Omni releases.

`benchmarks/data/audit_labels.csv` holds one row per GPU omni method that changed in release N (against N-1):
(GPU release N, NPU release N+1, NPU runner class, method, label, evidence). The labels were made by reading the
code of both releases: `drift` (omni's GPU-side change is not mirrored by the NPU side of N+1), `mirrored`,
`base-only` (the GPU method's new lines are vllm's base code, no omni change) and `inherited` (the NPU runner
runs the GPU method itself, through its MRO). The audit runs on the GPU runners of N against the NPU runners of
N+1 (`audit --gpu N --npu N+1`), three-way with the bases the releases pair with (vllm of N as `--gpu-base`,
vllm-ascend of N+1 as `--npu-base`, from `core.catalog.OMNI_PAIRING`; the vllm the previous omni release paired with as
`--gpu-history`, base code omni's copy of N may lag behind), and two-way (no `--gpu-base`) beside it.
A labelled method is predicted drift when the audit reports ONP4201 (drift) on it, or ONP4202 saying the NPU class has
no counterpart of the GPU method (an omission: the NPU side does not run omni's change at all). An ONP4202 that says
the NPU class *inherits* the GPU method (it shadows vllm-ascend's own method, or holds patterns the translator would
still change) is no drift claim: it agrees that the NPU runner runs omni's GPU code and warns about running it there.
Those are scored apart, as "inherited-method warnings", against the `inherited` label.

`benchmarks/data/audit_labels_heldout.csv` (vLLM-Omni 0.20.0 -> 0.22.0) was labelled after the rules of the audit
were set, before scoring: a held-out check. `benchmarks/data/audit_labels_heldout2.csv` (vLLM-Omni 0.22.0 GPU -> 0.24.0 NPU)
was labelled blind, before the audit was run on the pair: by reading the code of both releases and their bases only, without
running the audit or reading its output; `benchmarks/data/audit_labels_heldout3.csv` (vLLM-Omni 0.16.0 GPU -> 0.18.0 NPU)
was labelled blind the same way, and `benchmarks/data/audit_labels_heldout4.csv` (vLLM-Omni 0.14.0 GPU -> 0.16.0 NPU: every method the
omni GPU runners of 0.14.0, the first release on PyPI, define differently from vllm) after the rules made from the other
two blind sets. By default all five files are scored, each alone and together (`--labels` picks files).

Packages come from ~/.cache/omni-npu-port/pkgs (fetched from PyPI when missing; vllm sdists are large).

Run:  .venv/bin/python benchmarks/audit_precision.py [--labels FILE ...] [--json OUT.json] [--show-errors]
Target: precision >= 0.90 (three-way).
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from omni_npu_port.core.catalog import OMNI_PAIRING, parse_version  # noqa: E402
from omni_npu_port.port.audit import audit  # noqa: E402
from omni_npu_port.sources.fetch import FetchError, fetch_package  # noqa: E402

LABELS = Path(__file__).parent / "data" / "audit_labels.csv"
HELDOUT = Path(__file__).parent / "data" / "audit_labels_heldout.csv"
HELDOUT2 = Path(__file__).parent / "data" / "audit_labels_heldout2.csv"
HELDOUT3 = Path(__file__).parent / "data" / "audit_labels_heldout3.csv"
HELDOUT4 = Path(__file__).parent / "data" / "audit_labels_heldout4.csv"
POSITIVE, NEGATIVE = {"drift"}, {"mirrored", "base-only", "inherited"}
DRIFT_CODES = ("ONP4201", "ONP4202")


def read_labels(path: Path) -> list[dict]:
    "The labelled rows; a row with an unknown label is an error naming it."
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    for i, r in enumerate(rows, 2):
        if r["label"] not in POSITIVE | NEGATIVE:
            raise SystemExit(f"{path}:{i}: label {r['label']!r} is not one of {sorted(POSITIVE | NEGATIVE)}")
    return rows


def previous_vllm(gpu: str) -> str | None:
    "The vllm the omni release before `gpu` paired with (omni's GPU copy of N may still hold its code), None if it is N's own or none."
    older = [k for k in OMNI_PAIRING if parse_version(k) < parse_version(gpu)]
    prev = OMNI_PAIRING[max(older, key=parse_version)][0] if older else None
    return prev if prev != OMNI_PAIRING[gpu][0] else None


def omni_package(version: str) -> str:
    "vLLM-Omni `version`'s wheel, or its sdist where PyPI has no wheel (0.14.0)."
    try: return str(fetch_package(f"vllm-omni=={version}", kind="wheel"))
    except FetchError: return str(fetch_package(f"vllm-omni=={version}", kind="sdist"))


def sources(gpu: str, npu: str) -> dict:
    "The wheels and base sources of one release pair: omni N and N+1, vllm of N (and of N-1, `gpu_history`), vllm-ascend of N+1."
    vllm, prev = OMNI_PAIRING[gpu][0], previous_vllm(gpu)
    ascend = OMNI_PAIRING[npu][1][0]
    return dict(gpu=omni_package(gpu), npu=omni_package(npu),
                gpu_base=str(fetch_package(f"vllm=={vllm}", kind="sdist")), npu_base=str(fetch_package(f"vllm-ascend=={ascend}")),
                gpu_history=[str(fetch_package(f"vllm=={prev}", kind="sdist"))] if prev else [],
                target=f"vllm-ascend=={ascend}", vllm=vllm, ascend=ascend, prev=prev)


def inherited_warning(f) -> bool:
    "An ONP4202 that says the NPU class inherits the GPU method (shadowing, or patterns left to translate): no drift claim."
    return f.code == "ONP4202" and f.message.startswith(f"{f.cls} inherits ")


def predicted(findings) -> set:
    "(NPU class, method) pairs the audit reports drift on: ONP4201, and ONP4202 omissions."
    return {(f.cls, f.method) for f in findings if f.code in DRIFT_CODES and not inherited_warning(f)}


def warned(findings) -> set:
    "(NPU class, method) pairs with an inherited-method warning (scored apart from drift)."
    return {(f.cls, f.method) for f in findings if inherited_warning(f)}


def score(rows: list[dict], flagged: dict) -> dict:
    "TP/FP/FN/TN, precision and recall over the labelled rows; `flagged[(gpu, npu)]` is the audit's set."
    out = {"tp": [], "fp": [], "fn": [], "tn": []}
    for r in rows:
        hit = (r["npu_class"], r["method"]) in flagged[(r["gpu_release"], r["npu_release"])]
        pos = r["label"] in POSITIVE
        out["tp" if hit and pos else "fp" if hit else "fn" if pos else "tn"].append(r)
    n = {k: len(v) for k, v in out.items()}
    n["precision"] = n["tp"] / (n["tp"] + n["fp"]) if n["tp"] + n["fp"] else None
    n["recall"] = n["tp"] / (n["tp"] + n["fn"]) if n["tp"] + n["fn"] else None
    return {"counts": n, "rows": out}


def table(name: str, rows: list[dict], flagged: dict, warn: dict, show: bool) -> dict:
    "Print and return the counts of one labelled set: three-way and two-way drift, and the inherited-method warnings."
    fmt = lambda x: "—" if x is None else f"{x:.2f}"
    pairs = sorted({(r["gpu_release"], r["npu_release"]) for r in rows})
    print(f"\n{name}: {len(rows)} labelled methods ({sum(r['label'] in POSITIVE for r in rows)} drift) over {len(pairs)} release pairs")
    print(f"{'mode':10} {'TP':>4} {'FP':>4} {'FN':>4} {'TN':>4} {'precision':>10} {'recall':>8}")
    report = {}
    for mode, fl in flagged.items():
        sc = score(rows, fl)
        c = sc["counts"]
        print(f"{mode:10} {c['tp']:>4} {c['fp']:>4} {c['fn']:>4} {c['tn']:>4} {fmt(c['precision']):>10} {fmt(c['recall']):>8}")
        report[mode] = {"counts": c, "fp": sc["rows"]["fp"], "fn": sc["rows"]["fn"]}
        for kind in ("fp", "fn") if show else ():
            for r in sc["rows"][kind]:
                print(f"    {kind.upper()} {r['gpu_release']}->{r['npu_release']} {r['npu_class']}.{r['method']} ({r['label']}: {r['evidence']})")
    hit = [r for r in rows if (r["npu_class"], r["method"]) in warn[(r["gpu_release"], r["npu_release"])]]
    on = sum(r["label"] == "inherited" for r in hit)
    print(f"inherited-method warnings (ONP4202 'inherits ...', three-way): {len(hit)} on labelled methods, {on} labelled inherited")
    report["inherited-warnings"] = {"n": len(hit), "on_inherited": on, "rows": hit}
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", type=Path, action="append", help=f"a labels CSV; more than once for several (default: {LABELS.name}, {HELDOUT.name}, {HELDOUT2.name}, {HELDOUT3.name} and {HELDOUT4.name})")
    ap.add_argument("--json", type=Path, help="write the counts and the misjudged rows here")
    ap.add_argument("--show-errors", action="store_true", help="list the false positives and false negatives")
    args = ap.parse_args(argv)
    sets = {p.name: read_labels(p) for p in (args.labels or [LABELS, HELDOUT, HELDOUT2, HELDOUT3, HELDOUT4])}
    rows = [r for rs in sets.values() for r in rs]
    flagged, warn = {"three-way": {}, "two-way": {}}, {}
    for gpu, npu in sorted({(r["gpu_release"], r["npu_release"]) for r in rows}):
        s = sources(gpu, npu)
        t = time.perf_counter()
        three = audit(s["gpu"], s["npu"], s["npu_base"], s["target"], s["gpu_base"], s["gpu_history"])
        flagged["three-way"][(gpu, npu)], warn[(gpu, npu)] = predicted(three), warned(three)
        flagged["two-way"][(gpu, npu)] = predicted(audit(s["gpu"], s["npu"], s["npu_base"], s["target"]))
        print(f"omni {gpu} GPU vs {npu} NPU (vllm {s['vllm']}" + (f", older vllm {s['prev']}" if s["prev"] else "")
              + f", vllm-ascend {s['ascend']}): {time.perf_counter() - t:.1f} s")
    if len(sets) > 1: sets["all"] = rows
    report = {name: table(name, rs, flagged, warn, args.show_errors) for name, rs in sets.items()}
    if args.json: args.json.write_text(json.dumps(report, indent=2))
    for name, rep in report.items():
        p = rep["three-way"]["counts"]["precision"]
        print(f"target: three-way precision >= 0.90 on {name}: {'met' if p is not None and p >= 0.9 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
