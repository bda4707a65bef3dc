"""`omni-npu-port explain`, the links the tools print, and SARIF that code scanning can map (issue 34, part 2)."""
import json
import re
from pathlib import Path

import pytest

from omni_npu_port.cli.main import main
from omni_npu_port.core.catalog import CATALOG
from omni_npu_port.core.diagnostics import SEVERITIES, Diagnostic, codes_markdown, codes_page
from omni_npu_port.core.findings import format_findings, sarif_log
from omni_npu_port.docs.codes import all_codes

ROOT = Path(__file__).resolve().parents[1]
CODES = all_codes()
UNPUBLISHED = re.compile(r"omni-npu-port\.github\.io|github\.com/omni-npu-port")   # no site is published at either
RUNNER = "import torch\n\n\ndef f(x):\n    torch.cuda.synchronize()\n    with torch.cuda.graph(g):\n        y = x\n"


def free_code(prefix: str = "ONP1") -> str:
    "A well-formed code nobody registered."
    return next(c for c in (f"{prefix}{n:03d}" for n in range(1, 1000)) if c not in CODES)


# --- explain ---------------------------------------------------------------------------------------------------------
WITH_RECORDS = [c for c in CODES if CODES[c].records]
WITHOUT = [c for c in CODES if not CODES[c].records]


@pytest.mark.parametrize("code", WITH_RECORDS[:1] + WITHOUT[:1])
def test_explain_says_what_how_bad_what_to_do_the_pattern_and_an_example(code, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # no built docs around: the checkout's own _docs (a docs build) would name its pages
    c = CODES[code]
    assert main(["explain", code.lower()]) == 0
    out = " ".join(capsys.readouterr().out.split())   # the text is wrapped; compare it unwrapped
    assert out.startswith(f"{c.code} {c.name}")
    for part in (c.title.rstrip("."), c.severity, SEVERITIES[c.severity], " ".join(c.action.split()), c.notebook):
        assert part in out, part
    if c.records:
        first = CATALOG._by_id[c.records[0]]
        assert all(r in out for r in c.records)
        assert " ".join(first.gpu.split()) in out and " ".join(first.npu.split()) in out
    else:
        assert "example: none in the catalog" in out


def test_explain_json_is_the_registry_entry(capsys):
    code = next(c for c in CODES if CODES[c].records)
    assert main(["explain", code, "--json"]) == 0
    e = json.loads(capsys.readouterr().out)
    c = CODES[code]
    fields = ("code", "title", "severity", "action", "notebook")
    assert [e[f] for f in fields] == [getattr(c, f) for f in fields]
    assert [r["id"] for r in e["records"]] == list(c.records) and e["example"]["record"] == c.records[0]


def test_a_code_is_found_by_its_name_too(capsys):
    code = next(iter(CODES.values()))
    assert main(["explain", code.name]) == 0
    assert capsys.readouterr().out.startswith(f"{code.code} {code.name}")


def test_an_unknown_code_exits_2_with_the_nearest_codes(capsys):
    unknown = free_code()
    assert main(["explain", unknown]) == 2
    err = capsys.readouterr().err
    near = re.search(r"nearest: ([A-Z0-9, ]+)", err).group(1).split(", ")
    n = int(unknown[3:])
    closest = min(abs(int(c[3:]) - n) for c in CODES)
    assert near and all(c in CODES for c in near) and any(abs(int(c[3:]) - n) == closest for c in near), err
    assert main(["explain", "imprt-moved"]) == 2 and "ONP1001" in capsys.readouterr().err   # a misspelt name
    assert main(["explain"]) == 2 and "--all" in capsys.readouterr().err


def test_explain_all_lists_every_code_once_and_fits_the_width(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["explain", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [l.split()[0] for l in lines if l.startswith("ONP")] == sorted(CODES)
    assert max(map(len, lines)) <= 80
    assert main(["explain", "--all", "--json"]) == 0
    assert [e["code"] for e in json.loads(capsys.readouterr().out)] == list(CODES)


# --- links: a place that exists, never an unpublished site -----------------------------------------------------------
def docs_project(tmp: Path, built: bool) -> Path:
    "A project folder with a [tool.nbdev] pyproject and, if `built`, a codes page with one anchor per code."
    (tmp / "pyproject.toml").write_text('[project]\nname = "p"\n\n[tool.nbdev]\ndoc_path = "_docs"\n')
    if built:
        (tmp / "_docs" / "docs").mkdir(parents=True)
        (tmp / "_docs" / "docs" / "codes.html").write_text(
            "".join(f'<h3 id="{c.lower()}">{c}</h3>' for c in CODES))
    (tmp / "runner.py").write_text(RUNNER)
    return tmp


def translate_links(tmp: Path, monkeypatch, capsys) -> list[str]:
    "The pointers to the codes that `translate` writes into its report and prints in SARIF, run in `tmp`."
    monkeypatch.chdir(tmp)
    assert main(["translate", "runner.py", "--report", "r.json", "-o", "out"]) in (0, 1)
    report = json.loads((tmp / "r.json").read_text())
    refs = [report["docs"]] + [d["docs"] for f in report["files"] for d in f["diagnostics"]]
    capsys.readouterr()
    assert main(["translate", "runner.py", "--check", "--output-format", "sarif"]) == 1
    rules = json.loads(capsys.readouterr().out)["runs"][0]["tool"]["driver"]["rules"]
    return refs + [r["helpUri"] for r in rules if "helpUri" in r]


def test_links_go_to_the_built_codes_page_and_its_anchors(tmp_path, monkeypatch, capsys):
    proj = docs_project(tmp_path, built=True)
    refs = translate_links(proj, monkeypatch, capsys)
    page = (proj / "_docs" / "docs" / "codes.html").resolve()
    anchors = set(re.findall(r'id="([^"]+)"', page.read_text()))
    assert any("#" in r for r in refs)
    for r in refs:
        assert r.startswith(page.as_uri()), r
        if "#" in r: assert r.split("#")[1] in anchors, r
    code = next(iter(CODES))
    assert main(["explain", code, "--json"]) == 0                   # explain points at the same built page
    assert json.loads(capsys.readouterr().out)["reference"] == f"{page.as_uri()}#{code.lower()}"


def test_without_built_docs_the_links_are_the_explain_command(tmp_path, monkeypatch, capsys):
    refs = translate_links(docs_project(tmp_path, built=False), monkeypatch, capsys)
    codes = [r for r in refs if r != "omni-npu-port explain ONPxxxx"]
    assert codes and all(re.fullmatch(r"omni-npu-port explain ONP\d{4}", r) for r in codes), refs
    for r in codes:   # each names a code the command explains
        assert main(r.split()[1:]) == 0
    capsys.readouterr()


def test_no_module_or_metadata_names_an_unpublished_site():
    "nbdev writes `Docs: URL` from pyproject's Documentation into each module: neither is there, nor any printed URL."
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "omni_npu_port").rglob("*.py"))
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if UNPUBLISHED.search(line)]
    assert not hits, hits
    assert not UNPUBLISHED.search((ROOT / "pyproject.toml").read_text())


def test_the_unpublished_site_check_can_fail():
    assert UNPUBLISHED.search('"""x\n\nDocs: https://omni-npu-port.github.io/omni-npu-port/cli/main.html.md"""')


def test_the_generated_codes_page_has_an_anchor_for_every_code():
    "The Markdown the site renders: a `### ONPxxxx` heading (the renderer's anchor `#onpxxxx`) per code."
    md = codes_markdown(CODES.values())
    assert [h for h in re.findall(r"^### (ONP\d{4})$", md, re.M)] == list(CODES)


# --- SARIF -----------------------------------------------------------------------------------------------------------
# The official SARIF 2.1.0 schema is not fetched (no network at test time) nor vendored: this is the subset GitHub code
# scanning needs (its "SARIF support" page), with the schema's own names and constraints for those fields.
SARIF_SUBSET = {
    "type": "object", "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"}, "$schema": {"type": "string", "format": "uri"},
        "runs": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["tool", "results"],
            "properties": {
                "tool": {"type": "object", "required": ["driver"], "properties": {"driver": {
                    "type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string"}, "informationUri": {"type": "string", "format": "uri"},
                        "rules": {"type": "array", "items": {
                            "type": "object", "required": ["id"], "properties": {
                                "id": {"type": "string"}, "helpUri": {"type": "string", "format": "uri"},
                                "shortDescription": {"$ref": "#/$defs/message"}, "help": {"$ref": "#/$defs/message"},
                                "defaultConfiguration": {"type": "object",
                                                         "properties": {"level": {"$ref": "#/$defs/level"}}}}}}}}}},
                "originalUriBaseIds": {"type": "object", "additionalProperties": {
                    "type": "object", "required": ["uri"], "properties": {"uri": {"type": "string", "format": "uri",
                                                                                  "pattern": "/$"}}}},
                "results": {"type": "array", "items": {
                    "type": "object", "required": ["message", "ruleId"], "properties": {
                        "ruleId": {"type": "string"}, "ruleIndex": {"type": "integer", "minimum": 0},
                        "level": {"$ref": "#/$defs/level"}, "message": {"$ref": "#/$defs/message"},
                        "locations": {"type": "array", "items": {"type": "object", "properties": {
                            "physicalLocation": {"type": "object", "required": ["artifactLocation"], "properties": {
                                "artifactLocation": {"type": "object", "required": ["uri"], "properties": {
                                    "uri": {"type": "string", "format": "uri-reference"},
                                    "uriBaseId": {"type": "string"}}},
                                "region": {"type": "object", "properties": {
                                    "startLine": {"type": "integer", "minimum": 1},
                                    "startColumn": {"type": "integer", "minimum": 1}}}}}}}}}}}}}},
    },
    "$defs": {"message": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
              "level": {"enum": ["none", "note", "warning", "error"]}},
}


def check_sarif(log: dict):
    # imported here, not at collection: its URI format checkers take seconds to import in every test process
    import jsonschema
    v = jsonschema.Draft202012Validator
    v(SARIF_SUBSET, format_checker=v.FORMAT_CHECKER).validate(log)
    run = log["runs"][0]
    bases = run.get("originalUriBaseIds", {})
    for r in run["results"]:
        assert run["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
        for loc in r.get("locations", []):
            art = loc.get("physicalLocation", {}).get("artifactLocation")
            if art is None: continue
            if "uriBaseId" in art:   # relative to a base the run defines
                assert art["uriBaseId"] in bases and not art["uri"].startswith(("/", "file:")), art
            else:
                assert art["uri"].startswith("file:///"), art   # absolute only as a file URI


def test_the_sarif_check_can_fail():
    import jsonschema
    bad = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "t", "rules": [{"id": "ONP1001"}]}}, "results": [
        {"ruleId": "ONP1001", "ruleIndex": 0, "message": {"text": "m"},
         "locations": [{"physicalLocation": {"artifactLocation": {"uri": "/abs/runner.py"}}}]}]}]}
    with pytest.raises(AssertionError): check_sarif(bad)          # a bare absolute path, no base
    bad["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError): check_sarif(bad)


def test_sarif_paths_are_relative_to_srcroot_and_rules_link_where_a_page_exists(tmp_path):
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    found = [Diagnostic(next(iter(CODES)), "m", path=str(root / "pkg" / "my runner.py"), line=3, column=1),
             Diagnostic(list(CODES)[1], "m", path=str(tmp_path / "outside.py"), line=1),
             Diagnostic(list(CODES)[2], "m", where="NPURunner.step")]
    log = sarif_log(found, "omni-npu-port translate", root=root)
    check_sarif(log)
    run = log["runs"][0]
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == root.as_uri() + "/"
    locs = [r.get("locations", [{}])[0].get("physicalLocation", {}).get("artifactLocation") for r in run["results"]]
    assert locs[0] == {"uri": "pkg/my%20runner.py", "uriBaseId": "SRCROOT"}
    assert locs[1] == {"uri": (tmp_path / "outside.py").as_uri()} and locs[2] is None
    assert all("helpUri" not in r for r in run["tool"]["driver"]["rules"])   # no page built: no link
    page = tmp_path / "codes.html"
    page.write_text("<h3 id='x'></h3>")
    linked = sarif_log(found, "omni-npu-port translate", root=root, page=page)
    check_sarif(linked)
    rules = linked["runs"][0]["tool"]["driver"]["rules"]
    assert all(r["helpUri"] == f"{page.as_uri()}#{r['id'].lower()}" for r in rules)


def test_translate_check_sarif_from_the_command_line_passes_the_check(tmp_path, monkeypatch, capsys):
    proj = docs_project(tmp_path, built=True)
    monkeypatch.chdir(proj)
    (proj / ".git").mkdir()
    assert main(["translate", "runner.py", "--check", "--output-format", "sarif"]) == 1
    log = json.loads(capsys.readouterr().out)
    check_sarif(log)
    arts = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in log["runs"][0]["results"]]
    assert arts and all(a == {"uri": "runner.py", "uriBaseId": "SRCROOT"} for a in arts)
    assert all("helpUri" in r for r in log["runs"][0]["tool"]["driver"]["rules"])
    assert codes_page(proj) is not None
