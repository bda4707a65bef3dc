"""Bring the library to ruff's rules by fixing the notebooks, never omni_npu_port/*.py by hand (issue 34 part 6).

    python scripts/restyle.py [--root DIR] [--sort-imports] [MODULE_OR_FOLDER ...]     (default: the whole library)

1. `nbdev-export`, so the library is the notebooks' export before anything is changed;
2. `ruff check --fix` on the exported modules: safe fixes only, under the project's [tool.ruff] settings (which keep
   unused imports and import order, F401 and I001, for a person: re-exports and registration order live there;
   `--sort-imports` sorts the import blocks of the modules named, once a person has seen that their order is free);
3. `ruff format --range` on each statement that still holds a line over the line length, and on nothing else;
4. each exported cell ruff changed written back into its notebook cell, found by the `# %% NB #ID` marker above
   it: the cell's leading directive lines kept, the relative imports nbdev wrote turned back into absolute ones;
5. `nbdev-export` again: the library must equal what ruff made of it (else exit 1, naming the modules), then
   `nbdev-clean`; a cell the fixes or the formatting would take over 60 lines is left as it was, and named;
6. what ruff still finds, by rule, and the exported cells now over the lines tests/test_style.py allows.

Exit status: 0 done (what it could not write back is named); 1 the notebooks did not reproduce ruff's library (nothing
is rolled back: `git checkout` the notebooks and modules it names); 2 a path outside the library; 3 a tool is missing
or failed.
"""
from __future__ import annotations

import argparse
import ast
import json
import keyword
import re
import shutil
import subprocess
import sys
import tokenize
from collections import Counter
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

# A cell's marker line in an exported module, as nbdev writes it: `# %% ../../nbs/core/io.ipynb #639eb3e6`.
MARKER = re.compile(r"^# %% (?P<nb>\S+) #(?P<id>\w+)$", re.MULTILINE)
# The lines nbdev strips from the top of a cell on export: directives, cell magics, blank lines.
LEADING = re.compile(r"^(\s*#\s*\||\s*%%\w+|\s*$)")
MAX_CELL_LINES = 60   # tests/test_style.py's MAX_EXPORTED_LINES


def fail(message: str, status: int = 3):
    "Stop with `restyle: error: MESSAGE` and `status`."
    print(f"restyle: error: {message}", file=sys.stderr)
    sys.exit(status)


def tool(name: str) -> str:
    "The console script `name` installed beside this Python, else on PATH; exit 3 naming it when there is none."
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found: fail(f"{name} is not installed; install the dev extras: pip install -e '.[dev]'")
    return found


def run(cmd: list[str], root: Path, check: bool = True) -> subprocess.CompletedProcess:
    "`cmd` run in `root` with its output captured; with `check`, a failure stops the script naming the command."
    p = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
    if check and p.returncode != 0:
        fail(f"{' '.join(Path(c).name if i == 0 else c for i, c in enumerate(cmd[:3]))} … exited {p.returncode}:\n"
             f"{p.stdout}{p.stderr}")
    return p


def findings(ruff: str, root: Path, modules: list[Path]) -> list[dict]:
    "ruff's findings on `modules` under the project's settings (its JSON records: code, filename, location, fix)."
    p = run([ruff, "check", "--no-cache", "--output-format", "json", "--exit-zero", *map(str, modules)], root)
    return json.loads(p.stdout or "[]")


def cells(text: str) -> dict[tuple[str, str], str]:
    "The exported cells of a module's `text`, `(notebook, cell id)` -> code, blank lines at either end dropped."
    marks = list(MARKER.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    return {(m["nb"], m["id"]): text[m.end():end].strip("\n") for m, end in zip(marks, ends)}


def trailing_newlines(text: str) -> dict[tuple[str, str], int]:
    "How many newlines end each exported cell's source, read from a module's `text` (nbdev adds two before a marker)."
    marks = list(MARKER.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    out = {}
    for i, (m, end) in enumerate(zip(marks, ends)):
        chunk = text[m.end():end]
        after = len(chunk) - len(chunk.rstrip("\n"))
        out[m["nb"], m["id"]] = max(0, after - (1 if i == len(marks) - 1 else 2))   # the file ends with one newline
    return out


def absolute_imports(code: str, package: str) -> str:
    "`code` with its top-level relative `from` imports (nbdev's export of the package's own) made absolute again."
    lines = code.splitlines(keepends=True)
    for node in ast.parse(code).body:   # nbdev rewrites only the cell's top-level imports
        if not isinstance(node, ast.ImportFrom) or not node.level: continue
        parts = package.split(".")
        base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
        i, line = node.lineno - 1, lines[node.lineno - 1]
        m = re.compile(r"from\s+" + re.escape("." * node.level + (node.module or ""))).match(line, node.col_offset)
        lines[i] = line[:m.start()] + "from " + base + line[m.end():]
    return "".join(lines)


def split_leading(source: str) -> tuple[str, str, str]:
    "A notebook cell's `source` as (the leading lines nbdev strips, the code it exports, the code's trailing blanks)."
    lines = source.splitlines(keepends=True)
    n = next((i for i, line in enumerate(lines) if not LEADING.match(line)), len(lines))
    head, body = "".join(lines[:n]), "".join(lines[n:])
    core = body.rstrip("\n")
    return head, core, body[len(core):]


def module_package(module: Path, root: Path) -> str:
    "The dotted package a module of the library belongs to (`omni_npu_port.core` for omni_npu_port/core/io.py)."
    return ".".join(module.relative_to(root).parent.parts)


def cell_rows(text: str) -> list[tuple[str, str, int, int]]:
    "(notebook, cell id, first row, last row) of each exported cell's code in a module's `text`, rows 1-based."
    marks = list(MARKER.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    firsts = [text.count("\n", 0, m.end()) + 2 for m in marks]
    return [(m["nb"], m["id"], first, first + text[m.end():end].strip("\n").count("\n"))
            for m, end, first in zip(marks, ends, firsts)]


def undo_long_cells(module: Path, before: str) -> list[str]:
    "The cells of `module` ruff's fixes took over the line limit given their code of `before` back; what was undone."
    text, old, undone = module.read_text(encoding="utf-8"), cells(before), []
    for nb, cell_id, first, last in reversed(cell_rows(text)):
        if last - first + 2 <= MAX_CELL_LINES or (nb, cell_id) not in old or nb == "auto": continue
        lines = text.splitlines(keepends=True)
        text = "".join(lines[:first - 1] + [old[nb, cell_id] + "\n"] + lines[last:])
        undone.append(f"{Path(nb).name} #{cell_id}: fixing it would pass {MAX_CELL_LINES} lines")
    module.write_text(text, encoding="utf-8")
    return undone


def format_long_statements(ruff: str, root: Path, module: Path, rows: list[int]) -> tuple[int, list[str]]:
    "`ruff format --range` on the statement holding each of `rows`, bottom up: (how many reformatted, [refused])."
    done, refused = 0, []
    for row in sorted(set(rows), reverse=True):   # bottom up: a statement reformatted below moves no row above it
        text = module.read_text(encoding="utf-8")
        cell = next((c for c in cell_rows(text) if c[2] <= row <= c[3]), None)
        if cell is None or cell[0] == "auto": continue   # the module's docstring, or the `__all__` nbdev writes
        width = len(text.splitlines()[row - 1])
        p = run([ruff, "format", "--no-cache", "--range", f"{row}:1-{row}:{width + 1}", str(module)], root, check=False)
        if p.returncode != 0 or "reformatted" not in p.stdout + p.stderr: continue
        new = module.read_text(encoding="utf-8")
        grown = cell[3] - cell[2] + 1 + new.count("\n") - text.count("\n")
        if grown + 1 > MAX_CELL_LINES:   # + its `#| export` line: a cell this long fails tests/test_style.py
            module.write_text(text, encoding="utf-8")
            why = f"{Path(cell[0]).name} #{cell[1]}: formatting its long lines would pass {MAX_CELL_LINES} lines"
            if why not in refused: refused.append(why)
            continue
        done += 1
    return done, refused


# A comment a tool reads (`# noqa`, `# type:`, `# pyright:`, `# isort:`, `# fmt:`, nbdev's `#|`) stays where it is.
PRAGMA = re.compile(r"#\s*(noqa\b|type:|pyright:|isort:|fmt:|\||%%)", re.IGNORECASE)
KEYWORDS = frozenset(keyword.kwlist)
MIN_PIECE = 24   # a string that would be cut into pieces narrower than this is left for a person


def wrap_comment(text: str, indent: str, limit: int) -> list[str] | None:
    "A `# comment`'s words as comment lines at `indent`, each within `limit`; None when a word alone is too wide."
    words, lines = text.lstrip("#").split(), []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= limit: lines[-1] += " " + word
        else: lines.append(f"{indent}# {word}")
    return lines if lines and all(len(line) <= limit for line in lines) else None


def fstring_fields(body: str) -> list[tuple[int, int]]:
    "The (start, end) spans of an f-string body's replacement fields, `{{`/`}}` escapes being literal text."
    spans, i = [], 0
    while i < len(body):
        if body.startswith(("{{", "}}"), i): i += 2; continue
        if body[i] != "{": i += 1; continue
        start, depth, quote = i, 0, ""
        while i < len(body):
            c = body[i]
            if quote:
                if c == quote: quote = ""
            elif c in "'\"": quote = c
            elif c == "{": depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0: break
            i += 1
        spans.append((start, i + 1))
        i += 1
    return spans


def split_points(body: str, fields: list[tuple[int, int]]) -> list[int]:
    "Where `body` may be cut: just after a space in its literal text, never in an escape or a replacement field."
    out = []
    for i in range(1, len(body)):
        if body[i - 1] != " " or body[i] == " " or any(a < i < b for a, b in fields): continue
        backslashes = len(body[:i - 1]) - len(body[:i - 1].rstrip("\\"))
        if backslashes % 2 == 0: out.append(i)
    return out


def string_pieces(token: str, first: int, width: int, last: int) -> list[str] | None:
    "A one-line literal cut after spaces into literals: the first `first` wide, the others `width`, the last `last`."
    prefix = token[:len(token) - len(token.lstrip("rRbBuUfF"))]
    quote = token[len(prefix):len(prefix) + 1]
    if token[len(prefix):len(prefix) + 3] == quote * 3 or not token.endswith(quote): return None
    body, is_f = token[len(prefix) + 1:-1], "f" in prefix.lower()
    fields = fstring_fields(body) if is_f else []
    cuts, pieces, start, room = split_points(body, fields), [], 0, first
    def shell(text: str) -> str:
        if not is_f or fstring_fields(text): return f"{prefix}{quote}{text}{quote}"
        plain = prefix.replace("f", "").replace("F", "")   # no field: not an f-string (F541), `{{` is `{` again
        return f"{plain}{quote}{text.replace('{{', '{').replace('}}', '}')}{quote}"
    while len(shell(body[start:])) > last:   # the rest does not fit as the last piece: cut once more
        fits = [c for c in cuts if c > start and len(shell(body[start:c])) <= room]
        if not fits: return None
        pieces.append(shell(body[start:fits[-1]]))
        start, room = fits[-1], width
    pieces.append(shell(body[start:]))
    return pieces if len(pieces) > 1 else None


def enclosing(tokens: list, index: int) -> tuple[str, object] | None:
    "The innermost open bracket around `tokens[index]` and the token before it; None at the top level."
    stack = []
    for i, tok in enumerate(tokens[:index]):
        if tok.type == tokenize.OP and tok.string in "([{": stack.append((tok.string, tokens[i - 1] if i else None))
        elif tok.type == tokenize.OP and tok.string in ")]}" and stack: stack.pop()
    return stack[-1] if stack else None


def is_call(bracket: tuple[str, object] | None) -> bool:
    "Whether a bracket opens a call's (or a subscript's) arguments: implicit concatenation there is no collection item."
    if bracket is None or bracket[1] is None: return False
    char, before = bracket
    if char == "[": return before.type == tokenize.NAME and before.string not in KEYWORDS or before.string in ")]"
    return char == "(" and (before.type == tokenize.NAME and before.string not in KEYWORDS or before.string in ")]")


def split_line(text: str, row: int, limit: int) -> str | None:
    "`text` with line `row` brought within `limit`: its trailing comment moved above, or its longest string cut."
    lines = text.splitlines(keepends=True)
    line = lines[row - 1].rstrip("\n")
    if len(line) <= limit: return None
    try: tokens = list(tokenize.generate_tokens(iter(text.splitlines(keepends=True)).__next__))
    except (tokenize.TokenError, SyntaxError): return None
    on_row = [(i, t) for i, t in enumerate(tokens)
              if t.start[0] == row and t.type not in (tokenize.NL, tokenize.NEWLINE)]
    indent = line[:len(line) - len(line.lstrip())]
    comment = next((t for _, t in on_row if t.type == tokenize.COMMENT), None)
    if comment is not None and not PRAGMA.match(comment.string):
        code = line[:comment.start[1]].rstrip()
        if len(code) <= limit or not code.strip():
            wrapped = wrap_comment(comment.string, indent, limit)
            if wrapped is None: return None
            lines[row - 1:row] = [w + "\n" for w in wrapped] + ([code + "\n"] if code.strip() else [])
            return "".join(lines)
    strings = [(i, t) for i, t in on_row if t.type == tokenize.STRING and t.end[0] == row]
    if not strings: return None
    i, tok = max(strings, key=lambda it: len(it[1].string))
    bracket = enclosing(tokens, i)
    skip = (tokenize.NL, tokenize.COMMENT)
    before = next((t for t in reversed(tokens[:i]) if t.type not in skip), None)
    after = next((t for t in tokens[i + 1:] if t.type not in skip), None)
    joined_already = tokenize.STRING in (getattr(before, "type", None), getattr(after, "type", None))
    alone = getattr(before, "string", "") == "(" and getattr(after, "string", "") == ")"   # `("…")`: one expression
    # parentheses for a top-level string or a collection's item (ISC004); never inside a concatenation it is part of
    wrap = not (alone or joined_already or is_call(bracket))
    col = tok.start[1] + (1 if wrap else 0)
    rest = line[tok.end[1]:]
    close = ")" if wrap else ""
    if limit - col < MIN_PIECE: return None
    pieces = string_pieces(tok.string, limit - col, limit - col, limit - col - len(close) - len(rest))
    if pieces is None: return None
    joined = ("\n" + " " * col).join(pieces)
    new = line[:tok.start[1]] + ("(" if wrap else "") + joined + close + rest
    lines[row - 1] = new + "\n"
    return "".join(lines)


def same_values(before: str, after: str) -> bool:
    "Whether two module texts parse to the same tree (every constant, f-string and docstring the same value)."
    try: return ast.dump(ast.parse(before)) == ast.dump(ast.parse(after))
    except SyntaxError: return False


def split_long_lines(module: Path, rows: list[int], limit: int) -> tuple[int, list[str]]:
    "Long strings cut and long comments moved above on each of `rows`, bottom up, the module's values unchanged."
    done, refused = 0, []
    for row in sorted(set(rows), reverse=True):
        text = module.read_text(encoding="utf-8")
        cell = next((c for c in cell_rows(text) if c[2] <= row <= c[3]), None)
        if cell is None or cell[0] == "auto": continue
        new = split_line(text, row, limit)
        if new is None or not same_values(text, new): continue
        if cell[3] - cell[2] + 2 + new.count("\n") - text.count("\n") > MAX_CELL_LINES:
            why = f"{Path(cell[0]).name} #{cell[1]}: splitting its long strings would pass {MAX_CELL_LINES} lines"
            if why not in refused: refused.append(why)
            continue
        module.write_text(new, encoding="utf-8")
        done += 1
    return done, refused


def write_back(root: Path, module: Path, before: str, after: str) -> tuple[set[Path], list[tuple[tuple, str]]]:
    "The cells of `module` ruff changed, written into their notebooks: (notebooks written, [(cell, why)] not written)."
    old, new, ends = cells(before), cells(after), trailing_newlines(after)
    old_ends = trailing_newlines(before)
    if old.keys() != new.keys(): return set(), [(key, f"{module.name}: ruff moved a cell marker; nothing written")
                                                 for key in old]
    package, changed, skipped = module_package(module, root), {}, []
    for (nb, cell_id), code in new.items():
        if code == old[nb, cell_id] and ends[nb, cell_id] == old_ends[nb, cell_id]: continue
        if nb == "auto":   # nbdev writes this cell (`__all__`) itself
            skipped.append(((nb, cell_id), f"{module.name}: ruff changed the `__all__` nbdev writes; left as it was"))
            continue
        changed.setdefault((module.parent / nb).resolve(), []).append((nb, cell_id, code))
    written = set()
    for nb_path, edits in changed.items():
        where = nb_path.relative_to(root.resolve())
        notebook = json.loads(nb_path.read_text(encoding="utf-8"))
        by_id = {c.get("id"): c for c in notebook["cells"]}
        for marker, cell_id, code in edits:
            cell = by_id.get(cell_id)
            if cell is None:
                skipped.append(((marker, cell_id), f"{where} #{cell_id}: no such cell (export the notebook first)"))
                continue
            head, core, _ = split_leading("".join(cell["source"]))
            if absolute_imports(old[marker, cell_id], package) != core:   # the mapping must hold before it is used
                why = f"{where} #{cell_id}: its export is not its code; restyle it by hand"
                skipped.append(((marker, cell_id), why))
                continue
            ending = "\n" * ends[marker, cell_id]   # ruff's blank lines after the cell's code (after imports: I001)
            cell["source"] = (head + absolute_imports(code, package) + ending).splitlines(keepends=True)
            written.add(nb_path)
        if nb_path in written:
            nb_path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return written, skipped


def normalized(text: str) -> str:
    "A module's text with the blank lines before each cell marker made two, as nbdev writes them."
    return re.sub(r"\n+(?=# %% )", "\n\n\n", text)


def long_cells(nbs: list[Path], limit: int = MAX_CELL_LINES) -> list[str]:
    "`NOTEBOOK #ID: N lines` for each exported cell of `nbs` over `limit` lines (its `#| export` line counted)."
    out = []
    for nb_path in nbs:
        for cell in json.loads(nb_path.read_text(encoding="utf-8"))["cells"]:
            lines = "".join(cell["source"]).splitlines()
            exported = any(re.match(r"#\|\s*export[is]?\b", line) for line in lines if line.startswith("#|"))
            if cell["cell_type"] == "code" and exported and len(lines) > limit:
                out.append(f"{nb_path.name} #{cell.get('id')}: {len(lines)} lines")
    return out


def library_modules(root: Path, lib: Path, paths: list[str]) -> list[Path]:
    "The library's modules under `paths` (all of them when none is given), `_modidx.py` left out."
    tops = [(root / p).resolve() for p in paths] or [lib.resolve()]
    mods = sorted(p for top in tops for p in ([top] if top.is_file() else top.rglob("*.py")))
    outside = [str(t) for t in tops if lib.resolve() not in (t, *t.parents)]
    if outside: fail(f"not in the library ({lib.name}/): {', '.join(outside)}", 2)
    return [m for m in mods if m.name != "_modidx.py" and "__pycache__" not in m.parts]


def by_rule(found: list[dict]) -> str:
    "`CODE N, CODE N, …` of ruff's findings, the most frequent first."
    return ", ".join(f"{code} {n}" for code, n in Counter(f["code"] for f in found).most_common()) or "none"


def expected_cells(module: Path, root: Path, before: str, after: str, skipped: list[tuple]) -> dict:
    "The cells the second export must give: ruff's, the `skipped` ones as they were; the package's imports absolute."
    keep, old, package = {key for key, _ in skipped}, cells(before), module_package(module, root)
    return {key: absolute_imports(old[key] if key in keep else code, package) for key, code in cells(after).items()}


def exported_cells(module: Path, root: Path) -> dict:
    "The cells of `module` as exported now, the package's own imports made absolute (nbdev leaves some absolute)."
    package = module_package(module, root)
    return {key: absolute_imports(code, package) for key, code in cells(module.read_text(encoding="utf-8")).items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", help="modules or folders of the library (default: all of it)")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1], help="the repository root")
    ap.add_argument("--sort-imports", action="store_true",
                    help="let ruff sort import blocks (I001) too: only where their order registers nothing")
    args = ap.parse_args(argv)
    root = args.root.resolve()
    ruff, export, clean = tool("ruff"), tool("nbdev-export"), tool("nbdev-clean")
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file(): fail(f"{pyproject} not found: pass the repository root with --root", 2)
    settings = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {})
    lib = root / settings.get("nbdev", {}).get("lib_path", "omni_npu_port")
    limit = settings.get("ruff", {}).get("line-length", 88)
    run([export], root)
    modules = library_modules(root, lib, args.paths)
    before = {m: m.read_text(encoding="utf-8") for m in modules}
    start = findings(ruff, root, modules)
    sort = ["--extend-fixable", "I001"] if args.sort_imports else []
    run([ruff, "check", "--no-cache", "--fix", "--exit-zero", "--quiet", *sort, *map(str, modules)], root)
    refused = [why for m in modules for why in undo_long_cells(m, before[m])]
    rows: dict[Path, list[int]] = {}
    for f in findings(ruff, root, modules):
        if f["code"] == "E501": rows.setdefault(Path(f["filename"]), []).append(f["location"]["row"])
    ranges = 0
    for m, r in rows.items():
        n, no = format_long_statements(ruff, root, m, r)
        ranges, refused = ranges + n, refused + no
    rows = {}
    for f in findings(ruff, root, modules):
        if f["code"] == "E501": rows.setdefault(Path(f["filename"]), []).append(f["location"]["row"])
    splits = 0
    for m, r in rows.items():
        n, no = split_long_lines(m, r, limit)
        splits, refused = splits + n, refused + no
    after = {m: m.read_text(encoding="utf-8") for m in modules}
    written, skipped = set(), {}
    for m in modules:
        if after[m] != before[m]:
            w, skipped[m] = write_back(root, m, before[m], after[m])
            written |= w
    run([export], root)
    if written: run([clean], root)
    # nbdev turns a multi-line import of the package's own back into a relative one only when its last line is long
    # enough (its `update_import` slices the first line at the last line's end column), so imports compare absolute
    differ = [m for m in modules
              if exported_cells(m, root) != expected_cells(m, root, before[m], after[m], skipped.get(m, []))]
    end = findings(ruff, root, modules)
    print(f"restyle: {len(modules)} modules; ruff found {len(start)} ({by_rule(start)})")
    print(f"restyle: {ranges} long statements formatted; {splits} long strings or comments split; "
          f"{len(written)} notebooks written")
    print(f"restyle: left {len(end)} ({by_rule(end)}); `ruff check {lib.name}` lists them")
    for why in (why for s in skipped.values() for _, why in s): print(f"restyle: not written: {why}")
    for why in refused: print(f"restyle: not formatted: {why}")
    for line in long_cells(sorted(written)):
        print(f"restyle: now over {MAX_CELL_LINES} lines (split it by hand, tests/test_style.py): {line}")
    if differ:
        names = ", ".join(str(m.relative_to(root)) for m in differ)
        print(f"restyle: error: the notebooks' export differs from ruff's library in {names}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
