"""Derived rules over real vLLM-Omni workers and runners: is any GPU construct left silent? (issue 33, part 1)

For every vllm-omni release in ~/.cache/omni-npu-port/pkgs (wheel or sdist), the GPU side's worker and runner files
(every .py under a `worker*` folder of `vllm_omni/`: `worker/`, `worker_v2/`, `diffusion/worker/` and their subfolders;
not `platforms/`, the NPU, ROCm and XPU copies) are translated with `translate --check`'s rules for the
target `translate` infers for that release (`sources.stated.stated_target`), derived rules on. Four counts, the
last three independent of what the index says:

1. symbol sites: every use of a vllm name (an import, `module.name`) or of a runner attribute (`self.X` in a class
   built on a vllm class) that the target's sources say is missing, renamed or twinned, or whose vllm body is
   CUDA-only, as the derived index classifies it;
2. CUDA lines: every code line (not a comment or docstring) holding a CUDA-only token found by a plain regex
   (`torch.cuda`, a `"cuda"` string, `NCCL_`, `nccl`, `.cuda(`, `CUDAGraph`, `cuda_graph`, `is_cuda`), the check
   that does not trust the index (vllm's graph-mode words, `cudagraph_mode`, `CUDAGraphMode`, are shared by
   vllm-ascend and are not CUDA-only);
3. unknown GPU words: every GPU-worded identifier on a code line (a plain regex again) that neither the target's
   vllm sources nor vllm-ascend's hold, that the file does not bind itself (define, import, assign, take as a
   parameter) and that no file of the release binds (vLLM-Omni's own names);
4. runner attributes: every `self.X` read in a class of a runner file (any base but a vllm class other than
   `GPUModelRunner`: one built on vllm's runner through another file's class too) that the class does not define,
   the target's NPU runner (the twin of vllm's `GPUModelRunner`, with its bases; of vllm's second runner,
   `vllm.v1.worker.gpu.model_runner.GPUModelRunner`, for a class built on that one) does not have, and no file of
   the release binds.

A site or line is covered when the translator's report has any diagnostic (hand record or derived) at that line.
Silent ones are listed, and so is every derived finding, for a person to judge false flags; those on a line with
no GPU word that say a name is missing are marked `suspect` (a runner attribute the NPU twin lacks, most often).
Each finding that says a name is missing (ONP2041) gets its evidence from the other vllm releases in the cache, newer
than the target's vllm and not newer than the vLLM-Omni release: the first that defines the name (`def`, `class`,
`X =`, `self.X =`) shows the omni code is built on a newer vllm than its target has (a true flag: the port must supply
it); none that does leaves the finding to a person (`to judge`).

Run:  PYTHONPATH=. .venv/bin/python benchmarks/translate_derived.py [--release 0.18.0] > out.txt
      [--archives DIR] (more vllm-omni wheels: release candidates) [--target vllm-ascend==X] (where none is inferred)
      [--files REGEX] (other files than the GPU worker and runner folders, by their path in the archive)
      [--reader archive] (a runner's own classes read from the archive, `source_reader`, as `port` and the audit read
      them, instead of from the release unpacked on disk, as `translate` reads a tree)
Target: 0 silent.

`--port 0.30.0` instead ports that release (`port_release`) and prints each runner's derived findings, the port's and
inherited, and what the pass cost; `--audit 0.30.0 0.30.0rc1` audits the release's NPU copy against its GPU runners
(NPU base vllm-ascend 0.30.0rc1) and prints the derived drift (ONP2055, ONP2056).
"""
from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tarfile
import tempfile
import time
import tokenize
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from omni_npu_port.sources.readers import open_source  # noqa: E402
from omni_npu_port.sources.stated import stated_target, target_for  # noqa: E402
from omni_npu_port.translate import derived  # noqa: E402
from omni_npu_port.translate.engine import translate_source  # noqa: E402
from omni_npu_port.translate.rules import compile_rules  # noqa: E402

CACHE = Path.home() / ".cache" / "omni-npu-port" / "pkgs"
GPU_FILES = re.compile(r"(^|/)vllm_omni/(?!platforms/)(?:\w+/)*worker\w*/(?:\w+/)*\w+\.py$")   # any worker* folder
CUDA_TOKEN = re.compile(r"torch\.cuda|[\"']cuda\b|NCCL_|\bnccl|\.cuda\(|\bCUDAGraph\b|cuda_graph\b|\bis_cuda\b")
DERIVED = re.compile(r"ONP20(4[0-4]|6\d)$")   # the derived rules' codes (ONP2049: not run)
GPU_WORD = re.compile(r"\b\w*(?:cuda|gpu|nccl|CUDA|GPU|NCCL|Cuda|Gpu)\w*")


def releases(more=()):
    "(version, archive) of every vllm-omni release in the cache (and the folders `more`), a wheel before an sdist."
    out = {}
    for p in sorted(q for d in (CACHE, *map(Path, more)) for q in d.glob("vllm_omni-*")):
        if p.name.endswith((".whl", ".tar.gz")):
            v = p.name.split("-")[1].removesuffix(".tar.gz")
            if v not in out or p.name.endswith(".whl"): out[v] = p
    return sorted(out.items(), key=lambda kv: [int(x) for x in re.findall(r"\d+", kv[0])])


def gpu_files(archive: Path, files=GPU_FILES) -> dict[str, str]:
    "The GPU worker and runner files of a release (`files`: their paths' pattern): {path inside the package: text}."
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as z:
            return {n: z.read(n).decode() for n in z.namelist() if files.search(n)}
    with tarfile.open(archive) as t:
        return {m.name.split("/", 1)[1]: t.extractfile(m).read().decode() for m in t.getmembers()
                if m.isfile() and files.search(m.name)}


def unpack(archive: Path, into: Path):
    "Write a release's .py files under `into` (package paths, as `gpu_files` names them)."
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as z:
            files = {n: z.read(n) for n in z.namelist() if n.endswith(".py")}
    else:
        with tarfile.open(archive) as t:
            files = {m.name.split("/", 1)[1]: t.extractfile(m).read() for m in t.getmembers()
                     if m.isfile() and m.name.endswith(".py") and "/" in m.name}
    for name, data in files.items():
        if ".." in Path(name).parts or Path(name).is_absolute(): continue
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        (into / name).write_bytes(data)


BINDS = re.compile(r"(?:def|class)\s+(\w+)|self\.(\w+)\s*(?::[^=\n]*)?=(?!=)|^\s*(\w+)\s*(?::[^=\n]*)?=(?!=)", re.M)


def release_names(archive: Path) -> set:
    "Every name the release's own .py files bind (def, class, `self.X =`, `X =`): vLLM-Omni's names, not vllm's."
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as z:
            texts = [z.read(n).decode(errors="replace") for n in z.namelist() if n.endswith(".py")]
    else:
        with tarfile.open(archive) as t:
            texts = [t.extractfile(m).read().decode(errors="replace") for m in t.getmembers()
                     if m.isfile() and m.name.endswith(".py")]
    return {w for text in texts for m in BINDS.finditer(text) for w in m.groups() if w}


def code_lines(text: str) -> dict[int, str]:
    "{line: code with comments and docstrings left out}."
    docs = set()
    for n in ast.walk(ast.parse(text)):
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str):
            docs.update(range(n.lineno, n.end_lineno + 1))
    out = {}
    for t in tokenize.generate_tokens(io.StringIO(text).readline):
        if t.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE) or t.start[0] in docs: continue
        out[t.start[0]] = out.get(t.start[0], "") + " " + t.string
    return out


def bound(tree) -> set:
    "Every name a file binds: definitions, imports, assignments, parameters, attributes it assigns."
    out = set(derived._defined(tree))
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store): out.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store): out.add(n.attr)
        elif isinstance(n, ast.arg): out.add(n.arg)
        elif isinstance(n, ast.alias): out.add(n.asname or n.name.split(".")[-1]); out.update(n.name.split("."))
        elif isinstance(n, ast.ImportFrom) and n.module: out.update(n.module.split("."))
    return out


def translated(text: str, rules, on_disk: Path, read=None, member: str = ""):
    "`translate --check`'s report of one file: its tree's classes read on disk, or through the archive (`read`)."
    if read is None: return translate_source(text, rules, str(on_disk), comments=False)
    rules.derived = False   # the hand rules alone, then the derived ones with the archive's reader (as add_derived)
    try: t = translate_source(text, rules, member, comments=False)   # ARCHIVE/path: no file on disk
    finally: rules.derived = True
    if t.error is None:
        new = [f.diagnostic for f in derived.derived_check(text, rules, read=read) or []
               if not derived._duplicate(f, t.diagnostics)]
        t.diagnostics = sorted([*t.diagnostics, *new], key=lambda d: d.line)
    return t


def symbol_sites(ix, tree, read=None) -> set[tuple[int, str]]:
    "(line, name) of every vllm name or runner attribute the index classifies as twinned, missing or CUDA-only."
    return {(f.diagnostic.line, f.subject) for f in ix.file_findings(tree, read) if f.diagnostic.code in
            ("ONP2040", "ONP2041", "ONP2042", "ONP2060")}


RUNNER = "vllm.v1.worker.gpu_model_runner.GPUModelRunner"
RUNNER_V2 = "vllm.v1.worker.gpu.model_runner.GPUModelRunner"   # vllm's second model runner (vLLM-Omni's worker_v2)


def runner_attributes(ix, tree, omni: set, read=None) -> set[tuple[int, str]]:
    ("(line, X) of every `self.X` read in a runner file's classes that its class, the NPU runner and the release lack "
     "(the NPU twin of vllm's second runner for a class `read` finds built on it, else of the first).")
    out, table = set(), derived.import_table(tree)
    for c in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        vllm = {d for b in c.bases if (d := derived.dotted(b, table)) and d.startswith("vllm.")}
        if vllm - {RUNNER, RUNNER_V2}: continue   # built on another vllm class (a graph wrapper): not a runner's
        got = derived.built_on(c, table, read) if read is not None and not vllm else None
        runner = next(iter(vllm), None) or (got[0] if got else RUNNER)
        twin = ix.twin_of(runner if runner in (RUNNER, RUNNER_V2) else RUNNER)
        if twin is None or twin[0] not in ix.classes: continue
        npu = ix.members(twin[0])[0]
        own = set(derived.own_members(c)) | derived.probed(c)
        out |= {(n.lineno, n.attr) for n in ast.walk(c) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
                and getattr(n.value, "id", None) == "self" and n.attr not in own | npu.keys() | omni}
    return out


DEFINES = {True: r"self\.{0}\s*(?::[^=\n]*)?=(?!=)",                     # a runner attribute: `self.X =`
           False: r"^(?:async\s+)?(?:def|class)\s+{0}\b|^{0}\s*(?::[^=\n]*)?=(?!=)"}   # a module's def, class, name
_VLLM: dict = {}   # (version, name, attribute) -> where vllm defines it, or None


def vllm_archives() -> list[tuple[str, Path]]:
    "(version, archive) of every vllm release in the cache, oldest first (an sdist preferred: whole sources)."
    out = {}
    for p in sorted(CACHE.glob("vllm-*")):
        v = p.name.split("-")[1].removesuffix(".tar.gz")
        if p.name.endswith((".whl", ".tar.gz")) and (v not in out or p.name.endswith(".tar.gz")): out[v] = p
    return sorted(out.items(), key=lambda kv: [int(x) for x in re.findall(r"\d+", kv[0])])


def defined_where(version: str, archive: Path, name: str, attribute: bool) -> str | None:
    "`path:line` where a vllm release defines `name` (a module's def, class or name; an `attribute`: `self.X =`)."
    if (version, name, attribute) not in _VLLM:
        from omni_npu_port.sources.readers import open_source
        tree, rx = open_source(archive, "vllm"), re.compile(DEFINES[attribute].format(re.escape(name)), re.M)
        _VLLM[(version, name, attribute)] = None
        for m in tree.modules():
            text = tree.module_source(m) or ""
            if name in text and (hit := rx.search(text)):
                line = text.count("\n", 0, hit.start()) + 1
                _VLLM[(version, name, attribute)] = f"{m.replace('.', '/')}.py:{line}"
                break
    return _VLLM[(version, name, attribute)]


def evidence(subject: str, attribute: bool, target_vllm: str, omni: str) -> tuple[bool, str]:
    "(judged true, why) for a name the target lacks: the first newer cached vllm, up to the omni release, defining it."
    key = lambda v: [int(x) for x in re.findall(r"\d+", v)][:3]
    newer = [(v, a) for v, a in vllm_archives() if key(target_vllm) < key(v) <= key(omni)]
    for v, a in newer:
        if (where := defined_where(v, a, subject, attribute)) is not None:
            return True, f"true: vllm {v} defines {subject!r} ({where}), the target's vllm {target_vllm} does not"
    said = ", ".join(v for v, _ in newer) or "none cached"
    return False, f"to judge: no newer vllm up to {omni} defines {subject!r} ({said})"


def port_pass(version: str):
    "Port one release; each runner's derived findings (the port's, inherited) and the pass's wall and CPU seconds."
    import omni_npu_port.port.pipeline as pipe  # the derived pass calls check_ports there
    import omni_npu_port.port.release as rel
    real, spent = pipe.check_ports, {}
    def timed(*a, **k):
        t, c = time.perf_counter(), time.process_time()
        out = real(*a, **k)
        spent.update(wall=time.perf_counter() - t, cpu=time.process_time() - c)
        return out
    pipe.check_ports, t = timed, time.perf_counter()
    try: res = rel.port_release(version)
    finally: pipe.check_ports = real
    print(f"## vLLM-Omni {version} -> vllm-ascend {res.vllm_ascend}, vllm {res.vllm}: port "
          f"{time.perf_counter() - t:.0f} s, derived pass {spent['wall']:.1f} s ({spent['cpu']:.1f} s CPU)")
    for r in res.runners:
        print(f"  {r.cls}: derived {r.derived.cell()} (port / inherited)")
        for d in [*r.derived.port, *r.derived.inherited]: print(f"    {d}"[:220])


def audit_pass(version: str, ascend: str):
    "Audit one release's NPU copy against its GPU runners: the derived drift (ONP2055, ONP2056)."
    from omni_npu_port.port.audit import audit
    archive, t = dict(releases())[version], time.perf_counter()
    found = audit(str(archive), target=f"vllm-ascend=={ascend}")   # the copy against its own GPU runners, from the release before
    mine = [f for f in found if f.code in ("ONP2055", "ONP2056")]
    print(f"## vLLM-Omni {version}, NPU base vllm-ascend {ascend}: {len(found)} audit findings, {len(mine)} derived, "
          f"{time.perf_counter() - t:.0f} s")
    for f in mine: print(f"  {f}"[:220])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", action="append", help="only these vllm-omni versions")
    ap.add_argument("--port", metavar="VERSION", help="port this vLLM-Omni release and show the derived pass")
    ap.add_argument("--archives", action="append", default=[], metavar="DIR",
                    help="a folder of more vllm-omni wheels or sdists (release candidates fetched for the check)")
    ap.add_argument("--target", metavar="vllm-ascend==X", help="the target where none is inferred from the release")
    ap.add_argument("--files", type=re.compile, default=GPU_FILES, metavar="REGEX",
                    help="the files checked, by their path in the archive (default: the GPU worker and runner folders)")
    ap.add_argument("--reader", choices=("disk", "archive"), default="disk",
                    help="read a runner's own classes from the release unpacked on disk, or from its archive")
    ap.add_argument("--audit", nargs=2, metavar=("VERSION", "ASCEND"), help="audit this release's NPU copy")
    args = ap.parse_args()
    if args.port: return port_pass(args.port)
    if args.audit: return audit_pass(*args.audit)
    total = {"files": 0, "sites": 0, "sites silent": 0, "cuda lines": 0, "lines silent": 0, "unknown words": 0,
             "words silent": 0, "runner attributes": 0, "attributes silent": 0, "derived": 0,
             "said, not flagged (ONP2060)": 0, "suspects": 0,
             "missing, judged true": 0, "missing, to judge": 0}
    start = time.perf_counter()
    for version, archive in releases(args.archives):
        if args.release and version not in args.release: continue
        target = stated_target([archive])
        if target is None and args.target:   # as a user would: translate --check --target vllm-ascend==X
            target = target_for(args.target.split("==")[-1], f"given: --target {args.target}")
        rules = compile_rules(target)
        rules.derived = True
        t0 = time.perf_counter()
        ix = derived.derived_index(rules)
        built = time.perf_counter() - t0
        print(f"\n## vllm-omni {version} -> {target.line() if target else 'no target'}"
              f" (derived index: {'built in %.1f s' % built if ix else 'NO SOURCES in the cache'})")
        if ix is None: continue
        omni = release_names(archive)
        tmp = tempfile.TemporaryDirectory()   # the release's .py files on disk, as a user translates a tree
        unpack(archive, Path(tmp.name))
        in_archive = derived.source_reader(open_source(archive)) if args.reader == "archive" else None
        for path, text in sorted(gpu_files(archive, args.files).items()):
            on_disk = Path(tmp.name) / path
            read = in_archive or derived.module_reader(on_disk)
            t = translated(text, rules, on_disk, in_archive, f"{archive}/{path}")
            if t.error is not None: print(f"  {path}: {t.error.code} {t.error.message}"); continue
            at = {d.line for d in t.diagnostics}
            sites = symbol_sites(ix, ast.parse(text), read)
            lines = {n: s for n, s in code_lines(text).items() if CUDA_TOKEN.search(s)}
            silent_sites = sorted(s for s in sites if s[0] not in at)
            silent_lines = sorted(n for n in lines if n not in at)
            own = bound(ast.parse(text))
            words = sorted({(n, w) for n, s in code_lines(text).items() for w in GPU_WORD.findall(s)
                            if w not in ix.vllm_words() and w not in ix.names and w not in own and w not in omni})
            silent_words = [(n, w) for n, w in words if n not in at]
            attrs = runner_attributes(ix, ast.parse(text), omni, read) if "model_runner" in path else set()
            silent_attrs = sorted(a for a in attrs if a[0] not in at)
            mine = [d for d in t.diagnostics if DERIVED.match(d.code)]
            plain = {n for n, s in code_lines(text).items() if not GPU_WORD.search(s)}
            suspects = [d for d in mine if d.code == "ONP2041" and d.line in plain]
            for k, v in (("files", 1), ("sites", len(sites)), ("sites silent", len(silent_sites)),
                         ("cuda lines", len(lines)), ("lines silent", len(silent_lines)), ("unknown words", len(words)),
                         ("words silent", len(silent_words)), ("runner attributes", len(attrs)),
                         ("attributes silent", len(silent_attrs)), ("derived", len(mine)), ("suspects", len(suspects)),
                         ("said, not flagged (ONP2060)", sum(d.code == "ONP2060" for d in mine))):
                total[k] += v
            print(f"  {path}: {len(sites)} symbol sites ({len(silent_sites)} silent), {len(lines)} CUDA lines "
                  f"({len(silent_lines)} silent), {len(words)} unknown GPU words ({len(silent_words)} silent), "
                  f"{len(mine)} derived findings, {len(t.diagnostics)} diagnostics in all")
            for line, name in silent_sites: print(f"    SILENT site {line}: {name}")
            for n in silent_lines: print(f"    SILENT line {n}: {lines[n].strip()[:100]}")
            for n, w in silent_words: print(f"    SILENT word {n}: {w}")
            for n, x in silent_attrs: print(f"    SILENT runner attribute {n}: self.{x}")
            subjects = {(f.diagnostic.line, f.diagnostic.code): f.subject
                        for f in ix.file_findings(ast.parse(text), read)}
            for d in mine:
                print(f"    {'suspect ' if d in suspects else ''}{d.line} {d.code}: {d.message[:140]}")
                if d.code == "ONP2041" and target and target.vllm and (name := subjects.get((d.line, d.code))):
                    true, why = evidence(name, d.message.startswith(("self.", ".")), target.vllm, version)
                    total["missing, judged true" if true else "missing, to judge"] += 1
                    print(f"      evidence: {why}")
        tmp.cleanup()
    print(f"\n## totals ({time.perf_counter() - start:.0f} s): " + ", ".join(f"{k} {v}" for k, v in total.items()))


if __name__ == "__main__":
    main()
