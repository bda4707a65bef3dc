#!/usr/bin/env python
"""Talker-MTP step: eager vs device-graph replay per batch bucket, written as JSON, with the targets checked.

    python benchmarks/talker_mtp_graphs.py [--json FILE] [any `omni-npu-port bench` option ...]

It runs `omni-npu-port bench` on the profile's backend (or `--device`), writes the result JSON (default:
talker_mtp_graphs-<backend>.json in the system temp folder) and checks `omni_npu_port.bench.harness.check_targets`:
harness overhead < 2%; replay agrees with eager; on CUDA with the full shapes, batch-1 replay >= 3x eager and
replay <= 1.2x the kernel time summed over the captured graph (`--profile-kernels` is added automatically there).
Exit status: 0 when every target that applies holds, 1 when one fails, 2 for bad input (as the command).
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def _backend(argv: list[str]) -> str | None:
    "The backend the bench will run on, or None when it cannot be resolved (the bench then reports why)."
    from omni_npu_port.runtime.platform import current_platform, get_platform
    from omni_npu_port.core.profile import load_profile
    try:
        dev = argv[argv.index("--device") + 1] if "--device" in argv else load_profile().backend
        return (current_platform() if dev == "auto" else get_platform(dev)).name
    except Exception:
        return None


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console
    from rich.table import Table

    from omni_npu_port.bench.harness import check_targets
    from omni_npu_port.cli.main import main as cli_main
    argv = list(sys.argv[1:] if argv is None else argv)
    backend = _backend(argv)
    if "--json" not in argv:
        argv += ["--json", str(Path(tempfile.gettempdir()) / f"talker_mtp_graphs-{backend or 'unknown'}.json")]
    if backend == "cuda" and "--small" not in argv and "--profile-kernels" not in argv: argv.append("--profile-kernels")
    rc = cli_main(["bench", *argv])
    if rc: return rc
    path = Path(argv[argv.index("--json") + 1]).expanduser()
    result = json.loads(path.read_text(encoding="utf-8"))
    targets = check_targets(result)
    t = Table(title=f"targets ({result['device']['backend']}, {result['shapes']['preset']} shapes)")
    for col in ("target", "result", "detail"): t.add_column(col)
    for x in targets:
        t.add_row(x["target"], ("[green]pass[/]" if x["ok"] else "[red]FAIL[/]") if x["applies"] else "n/a", x["detail"])
    con = Console()
    con.print(t)
    con.print(f"result JSON: {path}")
    return 1 if any(x["applies"] and not x["ok"] for x in targets) else 0


if __name__ == "__main__":
    sys.exit(main())
