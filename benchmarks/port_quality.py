"""Port quality on real sources: how close `omni-npu-port port` gets to vLLM-Omni's hand-written NPU runner, per release.

For each vLLM-Omni release in RELEASES and each method the hand-written `OmniNPUModelRunner` overrides (and the omni
GPU runner defines), the difflib ratio (over lines) against the hand-written NPU method of
  - the port with conflicts left as git markers (`--prefer markers`, the default; markers count as lines),
  - the port with conflicts resolved by policy: `--prefer npu` / `--prefer omni` (each adds a `# ONP4008` line),
  - baseline 1: vllm-ascend's `NPUModelRunner.<method>` alone,
  - baseline 2: the omni GPU method alone, translated (in its module's import context, same target),
each once more as code only (`code_only`: comments, docstrings and blank lines left out on both sides), beside the
prose ceiling (`prose_ceiling`: the best ratio any port can reach that takes its comments and docstrings only from
its three inputs — where it is under a target, no port built from those inputs meets that target as text), and
each once more formatted by `ruff format` (`--format ruff`, the omni source's line length, else 120; the baselines
formatted the same way for that comparison). Plus the wall time of a whole-class port: `omni-npu-port port --class`
run as a fresh process with the same history (start-up, reading the sources, porting, writing; `--cold`: with an
empty sdist cache, so every sdist is unpacked anew), and `port_class` in-process with the sources already read.
Every port runs the translator for the target `vllm-ascend==<the NPU base version>` (the catalog's nearest release
when it does not list that one).

The vllm / vllm-ascend releases are the ones each vLLM-Omni release declares (RELEASES says where that is written).
Where the release pins an unreleased vllm-ascend commit, both PyPI neighbours of that commit are measured. Each
port also gets the older vllm releases the omni copy may lag behind (`history`: the previous omni release's vllm
(from three omni releases back) and the vllm each NPU base pairs with), so a stale omni side resolves to the NPU base (ONP4012).

Update (`port --update`): for consecutive releases N-1 -> N that both ship OmniNPUModelRunner, each method both hand
runners and both omni GPU runners define is predicted from N-1's hand-written method (base = N-1's omni GPU method,
ours = N-1's NPU method, theirs = N's omni GPU method) and compared with N's hand-written method, beside the "do nothing"
baseline (N-1's NPU method unchanged) and the three-way port of N; variants: conflicts kept as markers (default), with
--prefer npu, with --fence, with vllm-ascend's own change (N-1's -> N's first NPU base) folded in, and with vllm's own
change (N-1's -> N's vllm GPUModelRunner method) taken out of the GPU side's (`--gpu-base-old` / `--gpu-base`).

Target (issue 6): port ≥ 0.90 on `_dummy_run` and `_model_forward` and above both baselines; `load_model` above
both baselines. Reported as text (the issue's measure), as code only, and formatted. Sources come from
~/.cache/omni-npu-port/pkgs and are downloaded there (PyPI) when missing.
Usage: python benchmarks/port_quality.py [--releases 0.16.0 0.18.0 ...] [--vllm X --vllm-ascend Y ...] [--no-update] [--cold] [--json]
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time

from omni_npu_port.port.audit import DRIFT_CODES, audit
from omni_npu_port.core.catalog import OMNI_PAIRING, omni_history, parse_version
from omni_npu_port.sources.fetch import fetch_package
from omni_npu_port.port.classes import port_class
from omni_npu_port.port.formatting import format_code, format_options
from omni_npu_port.port.locate import PortError, locate
from omni_npu_port.port.method import port_method
from omni_npu_port.port.score import code_only, invented_prose, prose_ceiling, similarity
from omni_npu_port.port.translation import known_ascend, rules_for, translate_located
from omni_npu_port.port.update import update_method

# vLLM-Omni release -> (vllm, [vllm-ascend ...], where the pairing is written): the catalog's OMNI_PAIRING
# (omni_npu_port.core.catalog, "vLLM-Omni pairings"), which says where each pairing is written.
RELEASES = {omni: (vllm, list(ascends), evidence) for omni, (vllm, ascends, evidence) in OMNI_PAIRING.items()}
GPU_FILE = "vllm/v1/worker/gpu_model_runner.py"
TARGETS = {"_dummy_run": 0.90, "_model_forward": 0.90, "load_model": None}   # None: above both baselines only
POLICIES = ("markers", "npu", "omni")

ratio = similarity                     # difflib over lines, no junk heuristic (omni_npu_port.port.score.similarity)

def code_ratio(a: str, b: str) -> float:
    "similarity of the code lines only (comments, docstrings, blank lines left out on both sides)."
    return similarity(code_only(a), code_only(b))

def history_for(omni: str, vllm: str, ascend: str) -> list[str]:
    "Older vllm releases the omni copy may lag behind: the catalog's `omni_history` (VLLM_LINE from the vllm of the omni release OMNI_LAG back)."
    return omni_history(omni, vllm, ascend)

def audit_drift(o: str) -> dict[str, int]:
    "Per method of the hand-written OmniNPUModelRunner: the lines `omni-npu-port audit` reports as drift (ONP4120-ONP4123, ONP4129)."
    out: dict[str, int] = {}
    for f in audit(o, o):
        if f.code in DRIFT_CODES and f.cls == "OmniNPUModelRunner": out[f.method] = out.get(f.method, 0) + len(f.detail)
    return out

def hand_methods(o: str) -> list[str]:
    "The methods the hand-written OmniNPUModelRunner defines itself that the omni GPU runner also defines."
    hand, gpu = locate(f"{o}:OmniNPUModelRunner", False), locate(f"{o}:OmniGPUModelRunner", False)
    own = lambda c: [n.name for n in c.cls_node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return [m for m in own(hand) if m in set(own(gpu)) and m != "__init__"]

def run(vllm: str, ascend: str, omni: str, hist=(), cold: bool = False) -> dict:
    v, a, o = (str(fetch_package(s)) for s in (f"vllm=={vllm}", f"vllm-ascend=={ascend}", f"vllm-omni=={omni}"))
    hs = [str(fetch_package(f"vllm=={h}")) for h in hist]
    rules = rules_for(f"vllm-ascend=={known_ascend(ascend)}")   # what the port itself uses (target_of)
    rows, drift = [], audit_drift(o)
    for m in hand_methods(o):
        go = locate(f"{o}:OmniGPUModelRunner.{m}")
        hand = locate(f"{o}:OmniNPUModelRunner.{m}").method_source
        try: nb = locate(f"{a}:NPUModelRunner.{m}")
        except PortError: nb = None
        try: gb = locate(f"{v}/{GPU_FILE}:GPUModelRunner.{m}")
        except PortError: gb = None
        history = []
        for h in hs:
            try: history.append(locate(f"{h}/{GPU_FILE}:GPUModelRunner.{m}"))
            except PortError: pass
        omni_t = translate_located(go, rules)[0]
        ll, settings = format_options(go)
        fmt = lambda code: format_code(code, "ruff", ll, settings)[0]
        row = {"method": m, "npu_base": ratio(nb.method_source, hand) if nb else None, "omni_translated": ratio(omni_t, hand),
               "npu_base_ruff": ratio(fmt(nb.method_source), hand) if nb else None,
               "omni_translated_ruff": ratio(fmt(omni_t), hand), "line_length": ll,
               "npu_base_code": code_ratio(nb.method_source, hand) if nb else None,
               "omni_translated_code": code_ratio(omni_t, hand),
               "npu_base_code_ruff": code_ratio(fmt(nb.method_source), hand) if nb else None,
               "omni_translated_code_ruff": code_ratio(fmt(omni_t), hand)}
        inputs = [x.method_source for x in (gb, go, nb) if x is not None]
        row.update(ceiling=prose_ceiling(hand, inputs), invented=len(invented_prose(hand, inputs)), drift=drift.get(m, 0))
        if nb and gb:
            for pol in POLICIES:
                r = port_method(gb, go, nb, target=rules, prefer=pol, history=history)
                row[f"port_{pol}"] = ratio(r.code, hand)
                if pol == "markers": row.update(style=r.style, conflicts=r.conflicts, port_code=code_ratio(r.code, hand))
                if pol == "npu": row["resolved"] = sum(d.code == "ONP4008" for d in r.diagnostics)
            r = port_method(gb, go, nb, target=rules, history=history, format="ruff")
            row.update(port_ruff=ratio(r.code, hand), port_code_ruff=code_ratio(r.code, hand),
                       ruff_kept=[d.message for d in r.diagnostics if d.code == "ONP4014"])
        else:   # omni-only method: the translated omni method is the port
            row.update(style="omni-only", conflicts=0, resolved=0, port_ruff=row["omni_translated_ruff"], ruff_kept=[],
                       port_code=row["omni_translated_code"], port_code_ruff=row["omni_translated_code_ruff"],
                       **{f"port_{p}": row["omni_translated"] for p in POLICIES})
        rows.append(row)
    t0 = time.perf_counter()
    cls = port_class(locate(f"{v}:GPUModelRunner", False), locate(f"{o}:OmniGPUModelRunner", False),
                     locate(f"{a}:NPUModelRunner", False), history=[locate(f"{h}:GPUModelRunner", False) for h in hs])
    seconds = time.perf_counter() - t0
    return {"vllm": vllm, "vllm_ascend": ascend, "vllm_omni": omni, "history": list(hist), "rows": rows,
            "class_port_seconds": seconds, "class_ported": cls.stats["styles"],
            "cli_seconds": cli_class_port(v, o, a, hs, cold)}

def cli_class_port(v: str, o: str, a: str, hs: list[str], cold: bool = False) -> float:
    "Wall time of `omni-npu-port port --class` in a fresh process (start-up, reading the sources, the port, writing)."
    cmd = [sys.executable, "-c", "import sys; from omni_npu_port.cli.main import entry; sys.exit(entry())", "port", "--class",
           "--gpu-base", f"{v}:GPUModelRunner", "--gpu-omni", f"{o}:OmniGPUModelRunner", "--npu-base", f"{a}:NPUModelRunner"]
    if hs: cmd += ["--gpu-history", *[f"{h}:GPUModelRunner" for h in hs]]
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, **({"OMNI_NPU_PORT_SDIST_CACHE": d} if cold else {})}   # cold: every sdist unpacked anew
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        took = time.perf_counter() - t0
    if rc not in (0, 1): raise SystemExit(f"port --class failed (exit {rc}): {' '.join(cmd)}")
    return took

UPDATE_VARIANTS = {"update": {}, "update_npu": {"prefer": "npu"}, "update_fence": {"fence": True}}
GPU_FILE_OF = lambda o: f"{fetch_package(f'vllm=={RELEASES[o][0]}')}/{GPU_FILE}"   # vllm's runner file of an omni release

def run_update(prev: str, new: str, ports: dict | None = None) -> dict:
    "Predict vllm-omni `new`'s hand-written NPU methods from `prev`'s by `update_method`; ratios against `new`'s hand copies."
    ascend = lambda o: RELEASES[o][1][0]
    po, no = (str(fetch_package(f"vllm-omni=={o}")) for o in (prev, new))
    pa, na = (str(fetch_package(f"vllm-ascend=={ascend(o)}")) for o in (prev, new))
    rules = rules_for(f"vllm-ascend=={known_ascend(ascend(new))}")
    own = lambda c: [n.name for n in c.cls_node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    hp, hn = (locate(f"{o}:OmniNPUModelRunner", False) for o in (po, no))
    gp, gn = (locate(f"{o}:OmniGPUModelRunner", False) for o in (po, no))
    rows = []
    for m in [m for m in own(hn) if m in own(hp) and m in own(gp) and m in own(gn) and m != "__init__"]:
        pg, pn, go = locate(f"{po}:OmniGPUModelRunner.{m}"), locate(f"{po}:OmniNPUModelRunner.{m}"), locate(f"{no}:OmniGPUModelRunner.{m}")
        hand = locate(f"{no}:OmniNPUModelRunner.{m}").method_source
        row = {"method": m, "nothing": ratio(pn.method_source, hand), "gpu_changed": None,
               "port": (ports or {}).get(m)}
        for key, kw in UPDATE_VARIANTS.items():
            r = update_method(pg, pn, go, target=rules, **kw)
            row[key] = ratio(r.code, hand)
            if key == "update":
                row.update(conflicts=r.conflicts, gpu_changed=not any(d.code == "ONP4017" for d in r.diagnostics))
        try: nbo, nbn = locate(f"{pa}:NPUModelRunner.{m}"), locate(f"{na}:NPUModelRunner.{m}")
        except PortError: nbo = nbn = None
        row["update_ascend"] = ratio(update_method(pg, pn, go, nbo, nbn, target=rules).code, hand) if nbo else None
        try: gbo, gbn = (locate(f"{GPU_FILE_OF(o)}:GPUModelRunner.{m}") for o in (prev, new))
        except PortError: gbo = gbn = None
        if gbo:   # vllm's own change taken out of the GPU side's (--gpu-base-old / --gpu-base)
            r = update_method(pg, pn, go, target=rules, gpu_base_old=gbo, gpu_base=gbn)
            row.update(update_vllm=ratio(r.code, hand), conflicts_vllm=r.conflicts)
        else: row.update(update_vllm=None, conflicts_vllm=None)
        rows.append(row)
    return {"prev": prev, "new": new, "vllm_ascend": [ascend(prev), ascend(new)], "rows": rows}

def meets(row: dict, fmt: str = "") -> bool | None:
    "Whether a row meets issue 6's target for its method (None: no target); fmt='_ruff' / '_code': formatted / code-only port against baselines measured the same way."
    if row["method"] not in TARGETS: return None
    floor, p = TARGETS[row["method"]], row["port" + fmt if fmt else "port_markers"]
    return (floor is None or p >= floor) and all(p > (b or 0) for b in (row["npu_base" + fmt], row["omni_translated" + fmt]))

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", nargs="+", default=list(RELEASES), help="vLLM-Omni releases (keys of RELEASES)")
    ap.add_argument("--vllm", help="override: one GPU base release for every chosen omni release")
    ap.add_argument("--vllm-ascend", nargs="+", help="override: NPU base release(s) for every chosen omni release")
    ap.add_argument("--history", nargs="*", help="override: older vllm releases given to the port (default: history_for)")
    ap.add_argument("--no-update", action="store_true", help="skip the update table (release pairs N-1 -> N)")
    ap.add_argument("--cold", action="store_true", help="time the command-line class port with an empty sdist cache")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    bad = [r for r in args.releases if r not in RELEASES and not (args.vllm and args.vllm_ascend)]
    if bad: ap.error(f"no pairing recorded for vllm-omni {', '.join(bad)}; give --vllm and --vllm-ascend")
    results = []
    for omni in args.releases:
        vllm, ascends, _ = RELEASES.get(omni, (None, [], ""))
        vllm = args.vllm or vllm
        for asc in args.vllm_ascend or ascends:
            hist = args.history if args.history is not None else history_for(omni, vllm, asc)
            results.append(run(vllm, asc, omni, hist, args.cold))
    for res in results:
        for r in res["rows"]:
            r["meets_target"], r["meets_target_ruff"], r["meets_target_code"] = meets(r), meets(r, "_ruff"), meets(r, "_code")
            r["meets_target_code_ruff"] = meets(r, "_code_ruff")
            floor = TARGETS.get(r["method"])
            r["target_reachable"] = None if floor is None else r["ceiling"] >= floor
    updates = []
    if not args.no_update and not args.vllm:
        chosen = sorted(args.releases, key=parse_version)
        for prev, new in zip(chosen, chosen[1:]):
            first = next((res for res in results if res["vllm_omni"] == new), None)   # the port of N, first pairing
            ports = {r["method"]: r["port_markers"] for r in first["rows"]} if first else {}
            updates.append(run_update(prev, new, ports))
    if args.json:
        print(json.dumps({"port": results, "update": updates} if updates else results, indent=2)); return 0
    f = lambda x: "  n/a" if x is None else f"{x:.3f}"
    for res in results:
        print(f"\nvllm-omni {res['vllm_omni']}: vllm {res['vllm']} + vllm-ascend {res['vllm_ascend']}"
              f" (history: {', '.join(res['history']) or 'none'}; translator on)")
        print(f"{'method':<38}{'style':<14}{'confl':>6}{'markers':>9}{'npu':>8}{'omni':>8}{'NPU base':>10}{'omni tr.':>10}  "
              f"{'target':<9}{'ruff':>7}{'NPU b.':>8}{'omni t.':>8}  target")
        for r in res["rows"]:
            t = {True: "met", False: "NOT met", None: ""}[r["meets_target"]]
            tr = {True: "met", False: "NOT met", None: ""}[r["meets_target_ruff"]] + (" (kept unformatted)" if r["ruff_kept"] else "")
            print(f"{r['method'][:37]:<38}{r['style']:<14}{r['conflicts']:>6}{f(r['port_markers']):>9}{f(r['port_npu']):>8}"
                  f"{f(r['port_omni']):>8}{f(r['npu_base']):>10}{f(r['omni_translated']):>10}  {t:<9}"
                  f"{f(r['port_ruff']):>7}{f(r['npu_base_ruff']):>8}{f(r['omni_translated_ruff']):>8}  {tr}")
        print(f"{'  as code only':<32}{'drift':>6}{'ceiling':>8}{'invented':>9}{'port':>7}{'NPU base':>10}{'omni tr.':>10}  {'target':<9}"
              f"{'ruff':>7}{'NPU b.':>8}{'omni t.':>8}  target")
        for r in res["rows"]:
            t, tr = ({True: "met", False: "NOT met", None: ""}[r[k]] for k in ("meets_target_code", "meets_target_code_ruff"))
            print(f"{'  ' + r['method'][:29]:<32}{r['drift']:>6}{f(r['ceiling']):>8}{r['invented']:>9}{f(r['port_code']):>7}"
                  f"{f(r['npu_base_code']):>10}{f(r['omni_translated_code']):>10}  {t:<9}{f(r['port_code_ruff']):>7}"
                  f"{f(r['npu_base_code_ruff']):>8}{f(r['omni_translated_code_ruff']):>8}  {tr}")
        print(f"whole-class port: {res['cli_seconds']:.2f} s from the command line ({len(res['history'])} history "
              f"release(s), sdist cache {'cold' if args.cold else 'warm'}), {res['class_port_seconds']:.2f} s in-process; ported "
              f"{', '.join(f'{k} ({v})' for k, v in res['class_ported'].items())}")
    print("\nmarkers / npu / omni = the port with --prefer markers (conflicts left as markers) / npu / omni; "
          "target: markers ≥ 0.90 (_dummy_run, _model_forward) and above both baselines.\n"
          "ruff = the markers port with --format ruff; NPU b. / omni t. = the two baselines formatted the same way "
          "(its target compares the formatted port with those).\n"
          "as code only: drift = lines `omni-npu-port audit` reports the hand copy lacks or changed against the omni GPU "
          "method (ONP4201); ceiling = the best text ratio a port taking its prose only from its inputs can reach (invented = "
          "hand-written lines of prose none of the inputs holds); port / NPU base / omni tr. compared as code only, "
          "unformatted and formatted.")
    for key, what in (("meets_target", "unformatted"), ("meets_target_ruff", "--format ruff"), ("meets_target_code", "code only"),
                      ("meets_target_code_ruff", "code only, --format ruff")):
        print(f"\nsummary, {what} (pairings meeting the target / pairings measured):")
        for m in TARGETS:
            rs = [(res, r) for res in results for r in res["rows"] if r["method"] == m]
            ok = [f"{res['vllm_omni']}/{res['vllm_ascend']}" for res, r in rs if r[key]]
            print(f"  {m:<16} {len(ok)}/{len(rs)}" + (f"  (met: {', '.join(ok)})" if ok else ""))
    print("\nprose ceiling under the target (no port built from the three inputs can meet it as text):")
    for m, floor in TARGETS.items():
        if floor is None: continue
        rs = [(res, r) for res in results for r in res["rows"] if r["method"] == m]
        out = [f"{res['vllm_omni']}/{res['vllm_ascend']} ({r['ceiling']:.3f})" for res, r in rs if not r["target_reachable"]]
        print(f"  {m:<16} {len(out)}/{len(rs)}" + (f"  ({', '.join(out)})" if out else ""))
    slow = max((res["cli_seconds"] for res in results), default=0)
    warm = max((res["class_port_seconds"] for res in results), default=0)
    print(f"  whole-class port ≤ {slow:.2f} s from the command line on every pairing, sdist cache "
          f"{'cold' if args.cold else 'warm'} (≤ {warm:.2f} s in-process; target < 5 s)")
    if updates: print_updates(updates)
    return 0

def print_updates(updates: list[dict]):
    "The update table: per release pair and method, the update's ratio beside 'do nothing' and the port of N."
    f = lambda x: "  n/a" if x is None else f"{x:.3f}"
    print("\nupdate (port --update): N's hand-written method predicted from N-1's; ratio against N's hand-written method")
    print(f"{'N-1 -> N':<17}{'method':<38}{'GPU chg':>8}{'confl':>6}{'update':>8}{'nothing':>9}{'port':>7}"
          f"{'--prefer npu':>13}{'--fence':>9}{'+ascend':>9}{'-vllm':>7}{'confl':>6}  vs nothing")
    wins = losses = ties = 0
    for u in updates:
        for r in u["rows"]:
            d = r["update"] - r["nothing"]
            verdict = "beats" if d > 1e-9 else "loses" if d < -1e-9 else "same"
            wins, losses, ties = wins + (verdict == "beats"), losses + (verdict == "loses"), ties + (verdict == "same")
            print(f"{u['prev'] + ' -> ' + u['new']:<17}{r['method'][:37]:<38}{'yes' if r['gpu_changed'] else 'no':>8}"
                  f"{r['conflicts']:>6}{f(r['update']):>8}{f(r['nothing']):>9}{f(r['port']):>7}{f(r['update_npu']):>13}"
                  f"{f(r['update_fence']):>9}{f(r['update_ascend']):>9}{f(r['update_vllm']):>7}"
                  f"{'' if r['conflicts_vllm'] is None else r['conflicts_vllm']:>6}  {verdict} ({d:+.3f})")
    print(f"update against 'do nothing': beats {wins}, same {ties}, loses {losses} (conflict markers count as lines; "
          "port = the three-way port of N with its first vllm-ascend pairing)")
    rows = [r for u in updates for r in u["rows"] if r["update_vllm"] is not None]
    better = sum(r["update_vllm"] > r["update"] + 1e-9 for r in rows); worse = sum(r["update_vllm"] < r["update"] - 1e-9 for r in rows)
    vs = [(r["update_vllm"] > r["nothing"] + 1e-9) - (r["update_vllm"] < r["nothing"] - 1e-9) for r in rows]
    print(f"-vllm (vllm's own change taken out, --gpu-base-old/--gpu-base) against the plain update: better {better}, "
          f"worse {worse}, same {len(rows) - better - worse} of {len(rows)}; against 'do nothing': beats {vs.count(1)}, "
          f"same {vs.count(0)}, loses {vs.count(-1)}; conflicts {sum(r['conflicts'] for r in rows)} -> "
          f"{sum(r['conflicts_vllm'] for r in rows)}")

if __name__ == "__main__":
    sys.exit(main())
