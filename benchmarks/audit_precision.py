"""Precision and recall of `omni-npu-port audit` (the update's diff) on labelled vLLM-Omni release pairs.

Each labels CSV holds one row per (NPU runner class, method) where omni's GPU runner changed: (GPU release, NPU
release, [the release the NPU copy was last in step with,] NPU class, method, label, evidence[, target]).
The audit runs as `audit --gpu GPU --npu NPU --from PREV` (PREV: the `prev_release` column, else the release before
GPU), both ports on the target the NPU release states (the `target` column, where given). A labelled method is
predicted drift when the audit reports ONP4120-ONP4123 on it (the update would add, change or remove its lines, or
conflicts over them).

Label sets (benchmarks/data):
- `audit_labels_update_0.26.csv` and `_0.30.csv`: vLLM-Omni 0.26.0 (0.30.0) GPU runners against its own NPU copy, last in step in 0.24.0 (0.28.0).
  Labelled **blind** for this audit, before it existed (how: `audit_labels_update.md`). Labels drift / mirrored /
  inherited / not-copied. `_0.28.csv` (from 0.26) was labelled blind in session s8 before the audit ran on it, and
  `_0.22.csv` (from 0.20) after rules 7-10 were made, as their held-out check; `_0.24.csv` (from 0.22) in session
  s8-auditblind after rule 11, before the audit ran on it; `_0.20.csv` (from 0.18) in session s9-auditblind after
  rule 13, before the audit ran on it; `_0.18.csv` (from 0.16) in session s9-audit2 after rules 15-18, before the
  audit ran on it; `_0.16.csv` (from 0.14) in session s9-audit3 after rules 19-20, before the audit ran on it;
  `_0.31.csv` (0.31.0rc1 from 0.30.0) and `_0.32.csv` (0.32.0rc1 from 0.31.0rc1) in session s10-auditblind2 after
  rule 20, before the audit ran on them (release candidates: their rows name the target, vllm-ascend 0.30.0rc2).
  `_0.21.csv` (0.21.0rc1 from 0.20.0) and `_0.23.csv` (0.23.0rc1 from 0.22.0) in session s11-auditblind3 after rule
  24, before the audit ran on them (release candidates whose target is left to the audit's inference).
  `_0.25.csv` (0.25.0rc1 from 0.24.0), `_0.27.csv` (0.27.0rc1 from 0.26.0) and `_0.29.csv` (0.29.0rc1 from 0.28.0) in
  session s12-auditblind4 after rule 30 and the target inference, before the audit ran on them.
- `audit_labels.csv`, `audit_labels_heldout*.csv`: GPU release N against the NPU copy of N+1 (PREV: N's predecessor),
  labelled for the rule pile this audit replaced (drift / mirrored / base-only / inherited); the new engine was
  built from none of them, so they read as unseen for it too, but they were labelled with the old audit's output
  in view (see each file's evidence), so they are scored apart.

Packages come from ~/.cache/omni-npu-port/pkgs (fetched from PyPI when missing; vllm sdists are large).

Run:  .venv/bin/python benchmarks/audit_precision.py [--labels FILE ...] [--json OUT.json] [--show-errors]
Target: precision >= 0.90 and recall >= 0.90 on the blind set.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from omni_npu_port.core.catalog import OMNI_PAIRING, parse_version  # noqa: E402
from omni_npu_port.port.audit import DRIFT_CODES, audit  # noqa: E402

DATA = Path(__file__).parent / "data"
BLIND = [DATA / f"audit_labels_update_{v}.csv"
         for v in ("0.16", "0.18", "0.20", "0.21", "0.22", "0.23", "0.24", "0.25", "0.26", "0.27", "0.28", "0.29", "0.30",
                  "0.31", "0.32")]
OLDER = [DATA / "audit_labels.csv", *(DATA / f"audit_labels_heldout{s}.csv" for s in ("", "2", "3", "4"))]
POSITIVE, NEGATIVE = {"drift"}, {"mirrored", "base-only", "inherited", "not-copied"}


def read_labels(path: Path) -> list[dict]:
    ("The labelled rows (`prev_release` filled in: the release before the GPU one; rows of a GPU release with none "
     "before it are left out, said so); an unknown label is an error.")
    rows, out = list(csv.DictReader(path.open(encoding="utf-8"))), []
    for i, r in enumerate(rows, 2):
        if r["label"] not in POSITIVE | NEGATIVE:
            raise SystemExit(f"{path}:{i}: label {r['label']!r} is not one of {sorted(POSITIVE | NEGATIVE)}")
        if not r.get("prev_release"):
            older = [k for k in OMNI_PAIRING if parse_version(k) < parse_version(r["gpu_release"])]
            if not older: continue
            r["prev_release"] = max(older, key=parse_version)
        out.append(r)
    if len(out) < len(rows):
        print(f"{path.name}: {len(rows) - len(out)} row(s) left out: no release before their GPU release to be in step")
    return out


def key_of(r: dict) -> tuple:
    "(GPU, NPU, PREV, target) of a labelled row; target '' where the row leaves it to the audit's inference."
    return r["gpu_release"], r["npu_release"], r["prev_release"], r.get("target") or ""


def predicted(findings) -> set:
    "(NPU class, method) pairs the audit reports drift on."
    return {(f.cls, f.method) for f in findings if f.code in DRIFT_CODES}


def score(rows: list[dict], flagged: dict) -> dict:
    "TP/FP/FN/TN, precision and recall over the labelled rows; `flagged[key_of(row)]` is the audit's set."
    out = {"tp": [], "fp": [], "fn": [], "tn": []}
    for r in rows:
        hit = (r["npu_class"], r["method"]) in flagged[key_of(r)]
        pos = r["label"] in POSITIVE
        out["tp" if hit and pos else "fp" if hit else "fn" if pos else "tn"].append(r)
    n = {k: len(v) for k, v in out.items()}
    n["precision"] = n["tp"] / (n["tp"] + n["fp"]) if n["tp"] + n["fp"] else None
    n["recall"] = n["tp"] / (n["tp"] + n["fn"]) if n["tp"] + n["fn"] else None
    return {"counts": n, "rows": out}


def table(name: str, rows: list[dict], flagged: dict, show: bool) -> dict:
    "Print and return the counts of one labelled set."
    fmt = lambda x: "—" if x is None else f"{x:.2f}"
    sc = score(rows, flagged)
    c = sc["counts"]
    print(f"\n{name}: {len(rows)} labelled methods ({sum(r['label'] in POSITIVE for r in rows)} drift)")
    print(f"{'TP':>4} {'FP':>4} {'FN':>4} {'TN':>4} {'precision':>10} {'recall':>8}")
    print(f"{c['tp']:>4} {c['fp']:>4} {c['fn']:>4} {c['tn']:>4} {fmt(c['precision']):>10} {fmt(c['recall']):>8}")
    for kind in ("fp", "fn") if show else ():
        for r in sc["rows"][kind]:
            print(f"    {kind.upper()} {r['gpu_release']}/{r['npu_release']} from {r['prev_release']} "
                  f"{r['npu_class']}.{r['method']} ({r['label']}: {r['evidence'][:150]})")
    return {"counts": c, "fp": sc["rows"]["fp"], "fn": sc["rows"]["fn"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", type=Path, action="append", help="a labels CSV; more than once for several "
                    "(default: the blind sets audit_labels_update_*.csv; --older adds the rule pile's sets)")
    ap.add_argument("--older", action="store_true", help="also score the label sets made for the rule pile")
    ap.add_argument("--json", type=Path, help="write the counts and the misjudged rows here")
    ap.add_argument("--show-errors", action="store_true", help="list the false positives and false negatives")
    args = ap.parse_args(argv)
    files = args.labels or (BLIND + OLDER if args.older else BLIND)
    sets = {p.name: read_labels(p) for p in files}
    rows = [r for rs in sets.values() for r in rs]
    flagged, findings = {}, {}
    for key in sorted({key_of(r) for r in rows}):
        gpu, npu, prev, target = key
        t = time.perf_counter()
        found = audit(gpu, npu, prev, target or None)
        flagged[key], findings[key] = predicted(found), len([f for f in found if f.code in DRIFT_CODES])
        print(f"omni {gpu} GPU vs {npu} NPU copy, last in step in {prev}: {findings[key]} drift finding(s) on "
              f"{len(flagged[key])} method(s), {time.perf_counter() - t:.1f} s")
    if len(sets) > 1: sets["all"] = rows
    report = {name: table(name, rs, flagged, args.show_errors) for name, rs in sets.items()}
    if args.json: args.json.write_text(json.dumps(report, indent=2))
    for name, rep in report.items():
        p, r = rep["counts"]["precision"], rep["counts"]["recall"]
        met = p is not None and r is not None and p >= 0.9 and r >= 0.9
        print(f"target: precision and recall >= 0.90 on {name}: {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
