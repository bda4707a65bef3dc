"""Port fidelity (issue 24): per ported method of `port --release`, how much closer to the human's NPU port the port
gets than vllm-ascend's base method alone, whether omni's statements stay live, and whether the module is ready.

For each vLLM-Omni release (the catalog's OMNI_PAIRING; `--releases` to limit), with its declared pairing and history,
each method the port writes into a runner class that the release also hand-wrote (vllm_omni/platforms/npu/worker/*.py,
the class `place_runners` pairs with, a method of the same name defined there):

- `port`: similarity (omni_npu_port.port.score.similarity, difflib over lines) of the ported method to the hand method;
- `base`: similarity of vllm-ascend's NPUModelRunner.<method> alone (what the runner runs with no port) to the hand method
  (0 where vllm-ascend has no such method);
- `lift` = port - base; `differs` = the hand method is not vllm-ascend's (base < 0.999): lift should be > 0 there;
- live omni-added statements / all omni-added (`MethodCheck.omni_live`: in the port's live code, a commented conflict side
  is not live; present edited counts as live);
- per release: unreachable omni overrides (the port's reachability finding, ONP4401) and how many carry a finding;
  ready yes/no (the port's ready verdict) beside "compiles".

Sources come from ~/.cache/omni-npu-port/pkgs (downloaded there when missing), read at run time, never copied.
Usage: python benchmarks/port_fidelity.py [--releases 0.28.0 0.30.0] [--json F]
"""
from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from omni_npu_port.core.catalog import OMNI_PAIRING, parse_version  # noqa: E402
from omni_npu_port.port.audit import runner_bases  # noqa: E402
from omni_npu_port.port.locate import MethodSpec, locate, method_located, method_text, own_methods  # noqa: E402
from omni_npu_port.port.release import fetch_release, method_chunks, port_release  # noqa: E402
from omni_npu_port.port.score import similarity  # noqa: E402


def npu_base_of(res):
    "vllm-ascend's runner class of the release port (what runs with no port at all)."
    sym = runner_bases()[1][0]
    return locate(MethodSpec(str(fetch_release(f"vllm-ascend=={res.vllm_ascend}")), sym.module, sym.leaf), False)


def hunk_counts(diags, name: str) -> str | None:
    "applied / with fuzz / not applied omni hunks of a method the delta ported (ONP4410 / ONP4411 / ONP4412), None where it did not."
    n = {c: sum(d.code == c and d.where == name and not d.message.startswith("signature") for d in diags) for c in ("ONP4410", "ONP4411", "ONP4412")}
    return "/".join(map(str, n.values())) if any(n.values()) else None


def method_rows(res) -> list[dict]:
    "One row per ported method whose runner and name the release hand-wrote."
    npu, rows = npu_base_of(res), []
    for r in res.runners:
        if not r.hand: continue
        hand = locate(MethodSpec(res.origin, r.hand.rpartition(".")[0], r.cls), False)
        mine, hands = method_chunks(r.code, r.cls), own_methods(hand.cls_node)
        checks = {m.name: m for m in r.methods}
        for name, node in hands.items():
            if name not in mine or name not in checks: continue
            h = method_text(hand.module_text, node)
            nb = method_located(npu, name)
            base_src = nb.method_source if nb is not None and nb.method_node is not None else ""
            port_s, base_s = similarity(textwrap.dedent(mine[name]), h), similarity(base_src, h) if base_src else 0.0
            m = checks[name]
            rows.append({"release": res.omni, "method": f"{r.cls}.{name}", "style": m.style, "port": round(port_s, 3),
                         "base": round(base_s, 3), "lift": round(port_s - base_s, 3), "differs": base_s < 0.999,
                         "omni_added": m.omni_added, "omni_live": getattr(m, "omni_live", None),
                         "hunks": hunk_counts(r.diagnostics, name)})
    return rows


def release_row(res, rows: list[dict]) -> dict:
    "The release's totals: live share of omni-added statements (all ported methods), unreachable overrides, ready."
    ms = [m for r in res.runners for m in r.methods]
    added, live = sum(m.omni_added for m in ms), sum(getattr(m, "omni_live", 0) or 0 for m in ms)
    unreach = [u for r in res.runners for u in getattr(r, "unreachable", [])]
    return {"release": res.omni, "vllm": res.vllm, "vllm_ascend": res.vllm_ascend, "methods": len(ms), "scored": len(rows),
            "conflicts": res.conflicts, "omni_added": added, "omni_live": live,
            "live_share": round(live / added, 3) if added else None,
            "lift_pos": sum(r["lift"] > 0 for r in rows if r["differs"]), "differs": sum(r["differs"] for r in rows),
            "lift_neg": sum(r["lift"] < 0 for r in rows), "unreachable": len(unreach),
            "unreachable_unreported": sum(not u.get("finding") for u in unreach),
            "compiles": res.compiles, "ready": getattr(res, "ready", None), "seconds": round(res.seconds, 2)}


def print_tables(mrows: list[dict], rrows: list[dict]) -> None:
    print(f"{'release':<8}{'method':<52}{'style':<14}{'port':>6}{'base':>6}{'lift':>7}  {'live/added':>10}  hunks")
    for r in mrows:
        live = f"{r['omni_live']}/{r['omni_added']}" if r["omni_live"] is not None else f"?/{r['omni_added']}"
        print(f"{r['release']:<8}{r['method']:<52}{r['style']:<14}{r['port']:>6.3f}{r['base']:>6.3f}{r['lift']:>+7.3f}"
              f"{'' if r['differs'] else '='}  {live:>10}  {r['hunks'] or ''}")
    print()
    print(f"{'release':<8}{'vllm':<8}{'ascend':<11}{'meth':>5}{'scored':>7}{'confl':>6}{'live':>11}{'lift>0':>8}{'lift<0':>7}"
          f"{'unreach':>8}{'unrep.':>7}{'compiles':>9}{'ready':>6}{'s':>7}")
    for r in rrows:
        share = f"{r['omni_live']}/{r['omni_added']}"
        print(f"{r['release']:<8}{r['vllm']:<8}{r['vllm_ascend']:<11}{r['methods']:>5}{r['scored']:>7}{r['conflicts']:>6}"
              f"{share:>11}{str(r['lift_pos']) + '/' + str(r['differs']):>8}{r['lift_neg']:>7}{r['unreachable']:>8}"
              f"{r['unreachable_unreported']:>7}{'yes' if r['compiles'] else 'no':>9}{str(r['ready']):>6}{r['seconds']:>7}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", nargs="+", default=sorted(OMNI_PAIRING, key=parse_version))
    ap.add_argument("--json", metavar="F", help="write the rows as JSON")
    args = ap.parse_args(argv)
    mrows, rrows = [], []
    for omni in args.releases:
        res = port_release(omni)
        rows = method_rows(res)
        mrows += rows; rrows.append(release_row(res, rows))
        print(f"measured {omni}", file=sys.stderr, flush=True)
    print_tables(mrows, rrows)
    if args.json: Path(args.json).write_text(json.dumps({"methods": mrows, "releases": rrows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
