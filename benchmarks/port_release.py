"""Whole-release ports (`omni-npu-port port --release`, issue 17): per vLLM-Omni release on PyPI, what the port does.

For each release in the catalog's OMNI_PAIRING (every vLLM-Omni release on PyPI; `--releases` to limit), with its
declared pairing (the first vllm-ascend of the row) and the history the catalog chooses (`omni_history`):

- runners and methods ported (runners found by ancestry; those on vllm's second GPU runner class left out, ONP4302);
- faithfulness, the primary measure (omni_npu_port.port.release.check_method): NPU base statements missing from the
  port (reached through an explicit base call or super(), deleted by the omni method, present edited, lost), omni-added
  statements missing (explained, edited, lost), statements changed by translation only; lost = nothing explains it;
- conflicts with the history, and without it (how many the history removes);
- whether each module compiles as written (conflicts commented out, the default `--prefer comment`), with its conflicts
  resolved to the NPU side, and the names it then reads that nothing binds (ONP4025's check); and with `--prefer npu`;
- wall time of the command in a fresh process: cold (empty sdist and translation caches: every sdist unpacked and
  every method translated anew) and warm (both filled: a second run), both as the command runs by default (`-j`: one process per CPU) and warm with `-j 1`, and
  in-process with the sources already read (targets: < 10 s cold, < 3 s warm, 2 cores);
- the judge (omni_npu_port.port.judge, issue 31): basedpyright over each written module with the target's sources,
  per module the errors the port introduced / inherited from its inputs / excluded by a named rule, and beside them
  the errors of the release's hand-written NPU runner module checked the same way (`hand`); its seconds (warm,
  the inputs' results kept; the cold fresh-process run includes extracting the sources and checking the inputs);
- secondary, labelled: the text similarity (difflib over lines) of each ported method to the release's hand-written
  NPU method of the same runner and name, where the release has one (a hand copy is no yardstick of faithfulness:
  the 0.30.0 hand-written `_model_forward` lacks lines of both inputs).

Sources come from ~/.cache/omni-npu-port/pkgs (downloaded there when missing).
Usage: python benchmarks/port_release.py [--releases 0.28.0 0.30.0] [--no-cold] [--no-baseline] [-j N] [--json F]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from omni_npu_port.core.catalog import OMNI_PAIRING, parse_version  # noqa: E402
from omni_npu_port.port.locate import MethodSpec, locate, method_text, own_methods  # noqa: E402
from omni_npu_port.port.judge import judge_hand  # noqa: E402
from omni_npu_port.port.release import method_chunks, port_release  # noqa: E402
from omni_npu_port.port.score import similarity  # noqa: E402

CLI = [sys.executable, "-c", "import sys; from omni_npu_port.cli.main import entry; sys.exit(entry())"]


def cli_seconds(omni: str, cold: bool, jobs: int | None = None) -> tuple[float, int]:
    "Wall time and exit code of `port --release OMNI -o TMP` in a fresh process (cold: empty sdist and translation caches)."
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, **({"OMNI_NPU_PORT_SDIST_CACHE": str(Path(d) / "sdist"),
                                 "OMNI_NPU_PORT_JUDGE_CACHE": str(Path(d) / "judge"),
                                 "OMNI_NPU_PORT_TRANSLATION_CACHE": str(Path(d) / "translations")} if cold else {})}
        t0 = time.perf_counter()
        p = subprocess.run(CLI + ["port", "--release", omni, "-o", str(Path(d) / "out")] + (["-j", str(jobs)] if jobs else []), env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        took = time.perf_counter() - t0
    if p.returncode not in (0, 1): raise SystemExit(f"port --release {omni} failed (exit {p.returncode}): {p.stderr.strip()}")
    return took, p.returncode


def hand_similarity(res) -> dict[str, float]:
    "Per ported method whose runner the release has a hand-written NPU copy of, and that copy defines: similarity to it."
    out = {}
    for r in res.runners:
        if not r.hand: continue
        hand = locate(MethodSpec(res.origin, r.hand.rpartition(".")[0], r.cls), False)
        mine = method_chunks(r.code, r.cls)
        for name, node in own_methods(hand.cls_node).items():
            if name in mine:
                import textwrap
                out[f"{r.cls}.{name}"] = similarity(textwrap.dedent(mine[name]), method_text(hand.module_text, node))
    return out


def measure(omni: str, cold: bool = True, baseline: bool = True, jobs: int | None = None) -> dict:
    "Every figure of one release."
    row = {"vllm_omni": omni}
    if cold: row["cold_s"], _ = cli_seconds(omni, True, jobs)
    port_release(omni, judge=True)                       # sources read in this process; translations, judged inputs kept
    row["warm_s"], row["rc"] = cli_seconds(omni, False, jobs)
    row["warm_j1_s"], _ = cli_seconds(omni, False, 1)
    t0 = time.perf_counter()
    res = port_release(omni, workers=jobs or os.cpu_count() or 1, judge=True)
    row["in_process_s"] = time.perf_counter() - t0
    row.update(judge_rows(res))
    ms = [m for r in res.runners for m in r.methods]
    row.update(vllm=res.vllm, vllm_ascend=res.vllm_ascend, history=res.history, inferred=res.pairing.inferred,
               runners=len(res.runners), methods=len(ms), skipped=len(res.skipped), conflicts=res.conflicts,
               lost=res.lost, compiles=sum(r.compiles for r in res.runners),
               compiles_npu_side=sum(r.compiles_npu_side for r in res.runners),
               undefined=sum(len(r.undefined) for r in res.runners), layout=res.layout,
               npu_lines=sum(m.npu_lines for m in ms), npu_missing=sum(m.npu_missing for m in ms),
               npu_reached=sum(m.npu_reached for m in ms), omni_deleted=sum(m.omni_deleted for m in ms),
               npu_edited=sum(m.npu_edited for m in ms), omni_added=sum(m.omni_added for m in ms),
               omni_missing=sum(m.omni_missing for m in ms), omni_explained=sum(m.omni_explained for m in ms),
               omni_edited=sum(m.omni_edited for m in ms), translated=sum(m.translated for m in ms),
               classes=[r.cls for r in res.runners])
    if baseline: row["conflicts_no_history"] = port_release(omni, history=[]).conflicts
    npu = port_release(omni, prefer="npu")             # --prefer npu: every conflict resolved to the NPU side (ONP4008)
    row.update(prefer_npu_compiles=sum(r.compiles for r in npu.runners), prefer_npu_lost=npu.lost,
               prefer_npu_undefined=sum(len(r.undefined) for r in npu.runners))
    sims = hand_similarity(res)
    row["hand_similarity"] = sum(sims.values()) / len(sims) if sims else None
    row["hand_methods"] = len(sims)
    return row


def judge_rows(res) -> dict:
    "The judge's columns: per module port / inherited / excluded and the hand-written module's errors; totals; seconds."
    hand, _ = judge_hand(res)
    by_code = lambda ds: {c: sum(d.code == c for d in ds) for c in ("ONP4441", "ONP4442", "ONP4443", "ONP4444")}
    mods = []
    for r in res.runners:
        h = hand.get(r.hand.rpartition(".")[0]) if r.hand else None
        j = r.judge
        mods.append({"module": r.module, "verdict": r.verdict, "port": len(j.port), "inherited": len(j.inherited),
                     "excluded": len(j.excluded), "exclusions": j.exclusions(),
                     "port_by_code": by_code(j.port), "hand": len(h.port) if h and h.judged else None,
                     "hand_by_code": by_code(h.port) if h and h.judged else None,
                     "hand_excluded": len(h.excluded) if h and h.judged else None})
    tot = lambda k: sum(m[k] or 0 for m in mods)
    return {"judge": mods, "judge_port": tot("port"), "judge_inherited": tot("inherited"),
            "judge_excluded": tot("excluded"),
            "judge_hand": tot("hand"), "judge_s": res.judge_run.seconds, "judge_status": res.judge_run.status,
            "ready_yes": sum(m["verdict"] == "yes" for m in mods)}


def print_judge(rows: list[dict]):
    "Per module: the judge's port / inherited / excluded errors, the hand-written module's, by code."
    print(f"\n{'omni':<8}{'module':<60}{'port/inh/excl':>14}{'hand':>6}  {'port 4441/42/43/44':>19}"
          f"  {'hand 4441/42/43/44':>19}  ready")
    for r in rows:
        for m in r.get("judge", []):
            codes = lambda d: "/".join(str(v) for v in d.values()) if d else "n/a"
            counts = f"{m['port']}/{m['inherited']}/{m['excluded']}"
            print(f"{r['vllm_omni']:<8}{m['module']:<60}{counts:>14}{'n/a' if m['hand'] is None else m['hand']:>6}"
                  f"  {codes(m['port_by_code']):>19}  {codes(m['hand_by_code']):>19}  {m['verdict']}")
    print("port/inh/excl = the judge's errors the port introduced (ONP4441-ONP4444) / inherited from its inputs "
          "(ONP4445) / excluded by a named rule (ONP4446);\nhand = the release's hand-written NPU runner module checked "
          "the same way "
          "(errors neither inherited nor excluded); 4441 names undefined or unbound, 4442 calls that do not bind, "
          "4443 self. attributes, 4444 imports.")
    for r in rows: print(f"{r['vllm_omni']}: judge {r['judge_status']} in {r['judge_s']:.1f} s (in-process, warm); "
                         f"{r['ready_yes']} of {r['runners']} module(s) ready")


def print_table(rows: list[dict]):
    f = lambda x, w, p=2: f"{'n/a':>{w}}" if x is None else f"{x:>{w}.{p}f}" if isinstance(x, float) else f"{x:>{w}}"
    print(f"{'omni':<8}{'ascend':<11}{'hist':>5}{'run':>4}{'meth':>5}{'skip':>5}{'confl':>6}{'no-h':>6}{'lost':>5}"
          f"{'NPU st.':>8}{'reach/del/edit':>15}{'omni+':>6}{'expl/edit':>10}{'transl':>7}{'comp':>5}{'npu-s':>6}{'undef':>6}"
          f"{'npu:c/l':>8}{'cold s':>8}{'warm s':>8}{'-j1 s':>7}{'in-pr s':>8}  {'hand sim (secondary)':>20}")
    for r in rows:
        print(f"{r['vllm_omni']:<8}{r['vllm_ascend']:<11}{len(r['history']):>5}{r['runners']:>4}{r['methods']:>5}{r['skipped']:>5}"
              f"{r['conflicts']:>6}{f(r.get('conflicts_no_history'), 6)}{r['lost']:>5}{r['npu_lines']:>8}"
              f"{str(r['npu_reached']) + '/' + str(r['omni_deleted']) + '/' + str(r['npu_edited']):>15}{r['omni_added']:>6}"
              f"{str(r['omni_explained']) + '/' + str(r['omni_edited']):>10}{r['translated']:>7}"
              f"{str(r['compiles']) + '/' + str(r['runners']):>5}{str(r['compiles_npu_side']) + '/' + str(r['runners']):>6}"
              f"{r['undefined']:>6}{str(r['prefer_npu_compiles']) + '/' + str(r['prefer_npu_lost']):>8}{f(r.get('cold_s'), 8)}{f(r['warm_s'], 8)}{f(r['warm_j1_s'], 7)}{f(r['in_process_s'], 8)}  "
              f"{f(r['hand_similarity'], 12, 3)} ({r['hand_methods']} m.)")
    print("\nhist = older vllm releases given (the catalog's omni_history); run/meth = runner classes / methods ported; skip = runners "
          "left out (ONP4302);\nconfl / no-h = conflicts with / without the history; lost = statements of an input missing from the "
          "port with nothing to explain it (ONP4303);\nNPU st. = statements of the NPU base methods; reach/del/edit = of those missing "
          "from the port as written: reached by an explicit base call or super(), deleted by the omni method, present edited;\n"
          "omni+ = statements the omni methods add; expl/edit = of those missing: explained by a diagnostic or a replaced super() "
          "call, present edited; transl = port statements changed from omni by translation only;\ncomp / npu-s = modules that "
          "compile as written / with conflicts resolved to the NPU side; undef = names read that nothing binds (NPU side);\n"
          "npu:c/l = with --prefer npu: modules that compile / statements lost;\n"
          "cold / warm = `port --release` in a fresh process, empty / filled sdist and translation caches (-j: one process per CPU); -j1 = warm, one "
          "process; in-pr = in-process with the sources "
          "read (targets < 10 s cold, < 3 s warm);\nhand sim = mean text similarity of the ported methods to the release's "
          "hand-written NPU methods (secondary: not a measure of faithfulness).")
    worst = max((r.get("cold_s") or 0) for r in rows), max(r["warm_s"] for r in rows), max(r["in_process_s"] for r in rows)
    print(f"\nslowest: {worst[0]:.2f} s cold, {worst[1]:.2f} s warm (fresh process), {worst[2]:.2f} s in-process; "
          f"lost statements in all: {sum(r['lost'] for r in rows)}; conflicts {sum(r['conflicts'] for r in rows)} "
          f"(without history {sum(r.get('conflicts_no_history') or 0 for r in rows)})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", nargs="+", default=sorted(OMNI_PAIRING, key=parse_version))
    ap.add_argument("--no-cold", action="store_true", help="skip the cold fresh-process run")
    ap.add_argument("--no-baseline", action="store_true", help="skip the port without history")
    ap.add_argument("-j", "--jobs", type=int, default=None, help="runners ported in N processes (default: as the command, one per CPU)")
    ap.add_argument("--json", metavar="F", help="write the rows as JSON")
    args = ap.parse_args(argv)
    rows = []
    for omni in args.releases:
        rows.append(measure(omni, not args.no_cold, not args.no_baseline, args.jobs))
        print(f"measured {omni}", file=sys.stderr, flush=True)
    print_table(rows)
    print_judge(rows)
    if args.json: Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
