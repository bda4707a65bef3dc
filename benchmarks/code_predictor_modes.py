#!/usr/bin/env python
"""The code predictor's modes side by side in one run, written as JSON, with the issue's targets checked.

    python benchmarks/code_predictor_modes.py [--json FILE] [any `omni-npu-port bench --mode` option ...]

Runs `omni-npu-port bench --mode ...` (default `--mode all --subject both`; on a backend without device graphs the
graph modes are rows that say why), writes the result JSON (default: code_predictor_modes-<backend>.json in the system
temp folder) and checks `omni_npu_port.bench.modes.check_mode_targets`: on CUDA with the full shapes, the code
predictor's graph path (fused ops + device graph, no compile: the path an NPU takes) within 1.25x of compiled + device
graph (vLLM-Omni's CUDA recipe), at most 1,000 kernels per call on it, every graph mode within 1.2x of its summed
kernel time; everywhere, a ratio to the HBM roofline on every row that ran.
Exit status: 0 when every target that applies holds, 1 when one fails, 2 for bad input (as the command).
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console
    from rich.table import Table

    from omni_npu_port.bench.modes import check_mode_targets
    from omni_npu_port.cli.main import main as cli_main
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--mode" not in argv: argv += ["--mode", "all"]
    if "--subject" not in argv: argv += ["--subject", "both"]
    if "--json" not in argv: argv += ["--json", str(Path(tempfile.gettempdir()) / "code_predictor_modes.json")]
    rc = cli_main(["bench", *argv])
    if rc: return rc
    path = Path(argv[argv.index("--json") + 1]).expanduser()
    result = json.loads(path.read_text(encoding="utf-8"))
    targets = check_mode_targets(result)
    t = Table(title=f"targets ({result['device']['backend']}, {result['shapes']} shapes)")
    for col in ("target", "result", "detail"): t.add_column(col, overflow="fold")
    for x in targets:
        t.add_row(x["target"], ("[green]pass[/]" if x["ok"] else "[red]FAIL[/]") if x["applies"] else "n/a", x["detail"])
    con = Console(width=160)
    con.print(t)
    con.print(f"result JSON: {path}")
    return 1 if any(x["applies"] and not x["ok"] for x in targets) else 0


if __name__ == "__main__":
    sys.exit(main())
