"""Release updates (`port --release NEW --from PREV`, issue 32): on consecutive vLLM-Omni release pairs, how close the
update comes to NEW's hand-written NPU runner, beside doing nothing and porting NEW from scratch.

For each pair PREV -> NEW (the catalog's vLLM-Omni releases, consecutive: 0.14.0 -> 0.16.0 ... 0.28.0 -> 0.30.0;
`--pairs 0.16.0:0.18.0 ...` to limit), each runner both releases hand-write, and each method of NEW's hand-written
runner whose text changed since PREV's (ast-normalised; a method PREV's hand runner lacks counts as changed), the
ast-normalised similarity (`port.score.ast_similarity`) to NEW's hand method of:

  (a) PREV's hand method (doing nothing; 0 where PREV has none),
  (b) the from-scratch port of NEW (`port --release NEW`),
  (c) the update (`port --release NEW --from PREV`).

Where a port does not define the method (it inherits it from the omni GPU runner), its text is NEW's omni GPU method,
translated, for both (b) and (c). Prints the three columns per method and per pair, and the share of methods where
(c) >= both (a) and (b). Sources from the package cache (~/.cache/omni-npu-port/pkgs; fetched when missing).
With --judge the updated modules are judged (basedpyright, as `port --release --from` does by default) and each
module's verdict printed with the judge's findings by code.
Usage: python benchmarks/port_update.py [--pairs 0.16.0:0.18.0 ...] [-j N] [--judge] [--json F]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from omni_npu_port.core.catalog import OMNI_PAIRING, parse_version  # noqa: E402
from omni_npu_port.port.locate import MethodSpec, locate  # noqa: E402
from omni_npu_port.port.score import ast_normalised, ast_similarity  # noqa: E402
from omni_npu_port.port.update_release import (_gpu_runner, _match, class_methods, update_release,  # noqa: E402
                                               update_summary)
from omni_npu_port.port.release_inputs import locate_base, release_source  # noqa: E402
from omni_npu_port.port.release_report import release_summary  # noqa: E402
from omni_npu_port.port.runners import runner_bases  # noqa: E402


def hand_methods(origin: str, dotted: str | None) -> dict[str, str]:
    "The methods of a release's hand-written runner class (empty where it has none)."
    if not dotted: return {}
    mod, _, cls = dotted.rpartition(".")
    loc = locate(MethodSpec(origin, mod, cls), False)
    return class_methods(loc.module_text, cls) or {}


def changed(prev: dict, new: dict) -> list[str]:
    "Methods of NEW's hand runner whose ast-normalised text differs from PREV's (or that PREV lacks)."
    return [n for n, t in new.items() if n not in prev or ast_normalised(prev[n]) != ast_normalised(t)]


def pair_rows(prev: str, new: str, workers: int, judge: bool = False) -> tuple[list[dict], dict]:
    "One row per changed hand method of NEW: the three similarities; and the pair's facts (time, conflicts, ready)."
    t0 = time.perf_counter()
    u = update_release(new, prev, workers=workers, judge=judge)
    secs = time.perf_counter() - t0
    fresh, base, rows = u.fresh, u.base, []
    nsym = runner_bases()[1][0]
    nb = locate_base(release_source(f"vllm-ascend=={fresh.vllm_ascend}"), nsym)
    for r, upd in zip(fresh.runners, u.port.runners):
        b = _match(r, base.runners)
        if not r.hand or b is None or not b.hand: continue
        hp, hn = hand_methods(base.origin, b.hand), hand_methods(fresh.origin, r.hand)
        gpu = _gpu_runner(fresh.origin, r.gpu, nb)
        fm, um = class_methods(r.code, r.cls) or {}, class_methods(upd.code, upd.cls) or {}
        inherited = lambda n: (gpu.text(n) if gpu else None) or ""
        for n in changed(hp, hn):
            a = ast_similarity(hp[n], hn[n]).ratio if n in hp else 0.0
            bb = ast_similarity(fm.get(n) or inherited(n), hn[n]).ratio
            c = ast_similarity(um.get(n) or inherited(n), hn[n]).ratio
            rows.append({"pair": f"{prev}->{new}", "runner": r.cls, "method": n, "new_in_hand": n not in hp,
                         "nothing": round(a, 3), "scratch": round(bb, 3), "update": round(c, 3),
                         "update_best": c >= max(a, bb) - 1e-9})
    facts = {"seconds": round(secs, 1), "conflicts": u.conflicts, "compiles": u.port.compiles, "ready": u.port.ready,
             "summary": update_summary(u)[len(release_summary(u.port)):],
             "not_compiling": [why(r) for r in u.port.runners if not r.compiles],
             "verdicts": {r.cls: r.verdict for r in u.port.runners}, "findings": findings(u)}
    return rows, facts


def findings(u) -> dict[str, dict[str, int]]:
    ("Per runner, the ready rules' and the judge's findings (ONP4420-ONP4444) and the update's own ONP452x-ONP453x, by "
     "code.")
    out = {}
    for r in u.port.runners:
        got = [d.code for d in r.diagnostics
               if "ONP4420" <= d.code <= "ONP4444" or d.code.startswith(("ONP452", "ONP453"))]
        out[r.cls] = {c: got.count(c) for c in sorted(set(got))}
    return out


def why(r) -> str:
    "A runner whose update does not compile: its class and compile()'s message and line."
    try: compile(r.code, r.cls, "exec", dont_inherit=True); return f"{r.cls}: compiles"
    except (SyntaxError, ValueError) as e: return f"{r.cls}: {e}"


def report(rows: list[dict], title: str) -> list[str]:
    "The means of the three columns and the share of methods where the update is at least as close as both."
    if not rows: return [f"{title}: no changed hand method"]
    mean = lambda k: sum(r[k] for r in rows) / len(rows)
    best = sum(r["update_best"] for r in rows)
    return [f"{title}: {len(rows)} method(s); mean nothing {mean('nothing'):.3f}, scratch {mean('scratch'):.3f}, "
            f"update {mean('update'):.3f}; update >= both on {best}/{len(rows)} ({100 * best / len(rows):.0f} %)"]


def table_row(pair: str, rows: list[dict], f: dict | None) -> str:
    "One Markdown row: a pair's methods, the three means, the methods where the update is at least as close as both."
    if not rows: return f"| {pair} | 0 | | | | | |"
    mean = lambda k: sum(r[k] for r in rows) / len(rows)
    best = sum(r["update_best"] for r in rows)
    tail = f"{f['conflicts']} | {f['compiles']}" if f else " | "
    return (f"| {pair} | {len(rows)} | {mean('nothing'):.3f} | {mean('scratch'):.3f} | {mean('update'):.3f} | "
            f"{best}/{len(rows)} ({100 * best / len(rows):.0f} %) | {tail} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", nargs="+", metavar="PREV:NEW", help="release pairs (default: every consecutive pair)")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="runners ported in N processes")
    ap.add_argument("--judge", action="store_true", help="judge the updated modules (basedpyright)")
    ap.add_argument("--json", metavar="F", help="write the rows and facts as JSON")
    a = ap.parse_args(argv)
    rel = sorted(OMNI_PAIRING, key=parse_version)
    pairs = [tuple(p.split(":")) for p in a.pairs] if a.pairs else list(zip(rel, rel[1:]))
    every, facts = [], {}
    for prev, new in pairs:
        rows, f = pair_rows(prev, new, a.jobs, a.judge)
        facts[f"{prev}->{new}"] = f
        print(f"\n## {prev} -> {new}  ({f['seconds']} s; {f['conflicts']} conflict(s); compiles {f['compiles']}; "
              f"ready {f['ready']})")
        print(*f["summary"], *[f"does not compile: {w}" for w in f["not_compiling"]], sep="\n")
        print(*[f"{c}: verdict {v}; findings {f['findings'][c]}" for c, v in f["verdicts"].items()], sep="\n")
        print(f"{'runner.method':60} {'nothing':>8} {'scratch':>8} {'update':>8}  best")
        for r in rows:
            mark = " (new in the hand runner)" if r["new_in_hand"] else ""
            print(f"{r['runner'] + '.' + r['method']:60} {r['nothing']:8.3f} {r['scratch']:8.3f} {r['update']:8.3f}  "
                  f"{'yes' if r['update_best'] else 'no'}{mark}")
        print(*report(rows, f"{prev} -> {new}"), *report([r for r in rows if not r["new_in_hand"]],
                                                         f"{prev} -> {new}, methods PREV's hand runner has"), sep="\n")
        every += rows
    print("\n| pair | methods | nothing | scratch | update | update >= both | conflicts | compiles |")
    print("|---|---|---|---|---|---|---|---|")
    for key, f in facts.items():
        print(table_row(key, [r for r in every if r["pair"] == key], f))
    print(table_row("all", every, None))
    print()
    print(*report(every, "all pairs"), *report([r for r in every if not r["new_in_hand"]],
                                               "all pairs, methods PREV's hand runner has"), sep="\n")
    if a.json: Path(a.json).write_text(json.dumps({"rows": every, "pairs": facts}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
