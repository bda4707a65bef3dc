"""Port fidelity (issue 24): per ported method of `port --release`, how much closer to the human's NPU port the port
gets than vllm-ascend's base method alone, whether omni's statements stay live, and whether the module is ready.

For each vLLM-Omni release (the catalog's OMNI_PAIRING; `--releases` to limit), with its declared pairing and history,
each method the port writes into a runner class that the release also hand-wrote (vllm_omni/platforms/npu/worker/*.py,
the class `place_runners` pairs with, a method of the same name defined there):

- `port`: the issue's measure, ast-normalised similarity (omni_npu_port.port.score.ast_similarity: each method parsed,
  docstrings dropped, written back by ast.unparse, then difflib over lines; so comments — a commented conflict side, the
  port's `----Omni-new----` fences —, layout and docstrings do not count) of the ported method to the hand method;
  a text that does not parse falls back to raw lines (`parsed` false);
- `base`: the same for vllm-ascend's NPUModelRunner.<method> alone (what the runner runs with no port) against the hand
  method (0 where vllm-ascend has no such method);
- `lift` = port - base; `differs` = the hand method is not vllm-ascend's (base < 0.999): lift should be > 0 there;
- `port_raw` / `base_raw` / `lift_raw`: the same with omni_npu_port.port.score.similarity, difflib over the raw lines
  (comments and layout count: the numbers this benchmark reported before issue 24's measure was followed);
- live omni-added statements / all omni-added (`MethodCheck.omni_live`: in the port's live code, a commented conflict side
  is not live; present edited counts as live);
- per release: unreachable omni overrides (the port's reachability finding, ONP4401) and how many carry a finding;
  ready yes/no (the port's ready verdict) beside "compiles";
- the judge (issue 31): per release, basedpyright's errors in the written modules that the port introduced / inherited
  from its inputs / in the release's hand-written NPU runner modules checked the same way (`judge p/i/h`), and how many
  modules are ready (the judge agreeing).

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
from omni_npu_port.port.runners import runner_bases  # noqa: E402
from omni_npu_port.port.locate import MethodSpec, locate, method_located, method_text, own_methods  # noqa: E402
from omni_npu_port.port.judge import judge_hand  # noqa: E402
from omni_npu_port.port.release import fetch_release, method_chunks, port_release  # noqa: E402
from omni_npu_port.port.score import ast_similarity, similarity  # noqa: E402


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
            port_t = textwrap.dedent(mine[name])
            port_a = ast_similarity(port_t, h)
            base_a = ast_similarity(base_src, h) if base_src else None
            port_s, base_s = port_a.ratio, base_a.ratio if base_a else 0.0
            port_r, base_r = similarity(port_t, h), similarity(base_src, h) if base_src else 0.0
            m = checks[name]
            rows.append({"release": res.omni, "method": f"{r.cls}.{name}", "style": m.style, "port": round(port_s, 3),
                         "base": round(base_s, 3), "lift": round(port_s - base_s, 3), "differs": base_s < 0.999,
                         "parsed": port_a.parsed and (base_a is None or base_a.parsed),
                         "port_raw": round(port_r, 3), "base_raw": round(base_r, 3), "lift_raw": round(port_r - base_r, 3),
                         "differs_raw": base_r < 0.999,
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
            "lift_pos_raw": sum(r["lift_raw"] > 0 for r in rows if r["differs_raw"]), "differs_raw": sum(r["differs_raw"] for r in rows),
            "lift_neg_raw": sum(r["lift_raw"] < 0 for r in rows), "unparsed": sum(not r["parsed"] for r in rows),
            "unreachable_unreported": sum(not u.get("finding") for u in unreach),
            "compiles": res.compiles, "ready": getattr(res, "ready", None), "seconds": round(res.seconds, 2),
            **judge_row(res)}


def judge_row(res) -> dict:
    "The judge's totals: errors the port introduced, inherited, excluded; the hand-written modules'; modules ready."
    judged = [r for r in res.runners if getattr(r, "judge", None) is not None and r.judge.judged]
    if not judged: return {"judge_port": None, "judge_inherited": None, "judge_hand": None, "ready_modules": None}
    hand, _ = judge_hand(res)
    return {"judge_port": sum(len(r.judge.port) for r in judged),
            "judge_inherited": sum(len(r.judge.inherited) for r in judged),
            "judge_excluded": sum(len(r.judge.excluded) for r in judged),
            "judge_hand": sum(len(j.port) for j in hand.values() if j.judged) if hand else None,
            "ready_modules": f"{sum(r.verdict == 'yes' for r in res.runners)}/{len(res.runners)}"}


def print_tables(mrows: list[dict], rrows: list[dict]) -> None:
    print(f"{'release':<8}{'method':<52}{'style':<14}{'port':>6}{'base':>6}{'lift':>7}  {'raw:port':>8}{'base':>6}{'lift':>7}"
          f"  {'live/added':>10}  hunks")
    for r in mrows:
        live = f"{r['omni_live']}/{r['omni_added']}" if r["omni_live"] is not None else f"?/{r['omni_added']}"
        flag = ("" if r["differs"] else "=") + ("" if r["parsed"] else "!")   # = the hand copy is the base's; ! raw lines (no parse)
        print(f"{r['release']:<8}{r['method']:<52}{r['style']:<14}{r['port']:>6.3f}{r['base']:>6.3f}{r['lift']:>+7.3f}{flag:<2}"
              f"{r['port_raw']:>8.3f}{r['base_raw']:>6.3f}{r['lift_raw']:>+7.3f}  {live:>10}  {r['hunks'] or ''}")
    print()
    print(f"{'release':<8}{'vllm':<8}{'ascend':<11}{'meth':>5}{'scored':>7}{'confl':>6}{'live':>11}{'lift>0':>8}{'lift<0':>7}"
          f"{'raw>0':>8}{'raw<0':>7}{'unreach':>8}{'unrep.':>7}{'compiles':>9}{'ready':>6}{'judge p/i/h':>13}{'s':>7}")
    for r in rrows:
        share = f"{r['omni_live']}/{r['omni_added']}"
        print(f"{r['release']:<8}{r['vllm']:<8}{r['vllm_ascend']:<11}{r['methods']:>5}{r['scored']:>7}{r['conflicts']:>6}"
              f"{share:>11}{str(r['lift_pos']) + '/' + str(r['differs']):>8}{r['lift_neg']:>7}"
              f"{str(r['lift_pos_raw']) + '/' + str(r['differs_raw']):>8}{r['lift_neg_raw']:>7}{r['unreachable']:>8}"
              f"{r['unreachable_unreported']:>7}{'yes' if r['compiles'] else 'no':>9}"
              f"{str(r.get('ready_modules') or r['ready']):>6}"
              f"{'/'.join(str(r.get(k)) for k in ('judge_port', 'judge_inherited', 'judge_hand')):>13}{r['seconds']:>7}")
    added, live = sum(r["omni_added"] for r in rrows), sum(r["omni_live"] for r in rrows)
    print(f"\nall: {len(mrows)} methods; ast-normalised lift > 0 on {sum(r['lift_pos'] for r in rrows)} of "
          f"{sum(r['differs'] for r in rrows)} that differ, < 0 on {sum(r['lift_neg'] for r in rrows)} "
          f"(raw lines: > 0 on {sum(r['lift_pos_raw'] for r in rrows)} of {sum(r['differs_raw'] for r in rrows)}, "
          f"< 0 on {sum(r['lift_neg_raw'] for r in rrows)}); {sum(r['unparsed'] for r in rrows)} scored on raw lines (no parse); "
          f"mean lift {sum(r['lift'] for r in mrows) / max(len(mrows), 1):+.3f} (raw {sum(r['lift_raw'] for r in mrows) / max(len(mrows), 1):+.3f}); "
          f"live omni-added {live}/{added} = {100 * live / max(added, 1):.1f} %")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", nargs="+", default=sorted(OMNI_PAIRING, key=parse_version))
    ap.add_argument("--json", metavar="F", help="write the rows as JSON")
    args = ap.parse_args(argv)
    mrows, rrows = [], []
    for omni in args.releases:
        res = port_release(omni, judge=True)
        rows = method_rows(res)
        mrows += rows; rrows.append(release_row(res, rows))
        print(f"measured {omni}", file=sys.stderr, flush=True)
    print_tables(mrows, rrows)
    if args.json: Path(args.json).write_text(json.dumps({"methods": mrows, "releases": rrows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
