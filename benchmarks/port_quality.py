"""Port quality on real sources: how close `omni-npu-port port` gets to vLLM-Omni's hand-written NPU runner.

For each ported method of `OmniNPUModelRunner` (vllm-omni 0.16.0), the difflib ratio (over lines) of
  - the port (conflicts left as git markers, the default),
  - the port with conflicts resolved to the NPU side (`conflict_style="npu"`, what a reviewer mostly does),
  - baseline 1: vllm-ascend's `NPUModelRunner.<method>` alone,
  - baseline 2: the translated omni GPU method alone,
against the hand-written NPU method; plus the wall time of a whole-class port.

Sources are read from ~/.cache/omni-npu-port/pkgs and downloaded there (PyPI) when missing.
Usage: python benchmarks/port_quality.py [--vllm 0.16.0] [--vllm-ascend 0.16.0rc1 ...] [--json]
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
import time

from omni_npu_port.conformance import fetch_package
from omni_npu_port.port import locate, port_class, port_method, translate_code

METHODS = ("_dummy_run", "_model_forward", "load_model", "_talker_mtp_forward")

def ratio(a: str, b: str) -> float:
    "difflib similarity of two texts, line by line."
    return difflib.SequenceMatcher(None, a.splitlines(), b.splitlines(), autojunk=False).ratio()

def run(vllm: str, ascend: str, omni: str) -> dict:
    v, a, o = (str(fetch_package(s)) for s in (f"vllm=={vllm}", f"vllm-ascend=={ascend}", f"vllm-omni=={omni}"))
    rows = []
    for m in METHODS:
        go = locate(f"{o}:OmniGPUModelRunner.{m}")
        hand = locate(f"{o}:OmniNPUModelRunner.{m}").method_source
        try: nb = locate(f"{a}:NPUModelRunner.{m}")
        except ValueError: nb = None
        try: gb = locate(f"{v}/vllm/v1/worker/gpu_model_runner.py:GPUModelRunner.{m}")
        except ValueError: gb = None
        omni_t = translate_code(go.method_source, f"vllm-ascend=={ascend}")[0]
        row = {"method": m, "npu_base": ratio(nb.method_source, hand) if nb else None, "omni_translated": ratio(omni_t, hand)}
        if nb and gb:
            r = port_method(gb, go, nb)
            rn = port_method(gb, go, nb, conflict_style="npu")
            row.update(style=r.style, conflicts=r.conflicts, port=ratio(r.code, hand), port_npu_resolved=ratio(rn.code, hand))
        else:   # omni-only method: the translated omni method is the port
            row.update(style="omni-only", conflicts=0, port=row["omni_translated"], port_npu_resolved=row["omni_translated"])
        rows.append(row)
    t0 = time.perf_counter()
    cls = port_class(locate(f"{v}:GPUModelRunner", False), locate(f"{o}:OmniGPUModelRunner", False),
                     locate(f"{a}:NPUModelRunner", False))
    return {"vllm": vllm, "vllm_ascend": ascend, "vllm_omni": omni, "rows": rows,
            "class_port_seconds": time.perf_counter() - t0, "class_ported": cls.stats["styles"]}

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm", default="0.16.0")
    ap.add_argument("--vllm-ascend", nargs="+", default=["0.16.0rc1", "0.18.0"])
    ap.add_argument("--vllm-omni", default="0.16.0")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    results = [run(args.vllm, asc, args.vllm_omni) for asc in args.vllm_ascend]
    if args.json:
        print(json.dumps(results, indent=2)); return 0
    f = lambda x: "  n/a" if x is None else f"{x:.3f}"
    for res in results:
        print(f"\nvllm {res['vllm']} + vllm-ascend {res['vllm_ascend']} → vllm-omni {res['vllm_omni']} OmniNPUModelRunner")
        print(f"{'method':<22}{'style':<14}{'confl':>6}{'port':>8}{'port*':>8}{'NPU base':>10}{'omni tr.':>10}")
        for r in res["rows"]:
            print(f"{r['method']:<22}{r['style']:<14}{r['conflicts']:>6}{f(r['port']):>8}{f(r['port_npu_resolved']):>8}"
                  f"{f(r['npu_base']):>10}{f(r['omni_translated']):>10}")
        print(f"port* = conflicts resolved to the NPU side. Whole-class port: {res['class_port_seconds']:.2f} s, "
              f"ported {', '.join(f'{k} ({v})' for k, v in res['class_ported'].items())}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
