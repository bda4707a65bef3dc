"""The judge's differential on import errors (issue 31, s10-rcfix): an import the NPU base already fails on is
inherited however the port splits its names; another module or another name stays the port's. Fixture errors are
written as basedpyright reports them (rule, message, range); no checker run."""
from omni_npu_port.port import judge as J

BASE = "from v.outputs import (\n    Kept,\n    Gone,\n)\nfrom v import missing_mod\n"


def _sym(name: str, line: int, col: int, rule="reportAttributeAccessIssue", what="is unknown import symbol") -> dict:
    return {"rule": rule, "message": f'"{name}" {what}', "range": {"start": {"line": line, "character": col}}}


def _judge(port: str, errs: list[dict]):
    base = J.checker_errors([{"file": "/in/base.py", **_sym("Gone", 2, 4)}], {"/in/base.py": BASE})
    mine = J.checker_errors([{"file": "/out/port.py", **e} for e in errs], {"/out/port.py": port})
    return J._verdict("pkg.port", mine, {e.key for e in base}, J.JudgeContext({"/out/port.py": port}))


def test_a_name_the_base_imports_in_a_longer_statement_is_inherited():
    port = "from v.outputs import Kept\nfrom v.outputs import Gone\n"
    j = _judge(port, [_sym("Gone", 1, 22)])
    assert [d.code for d in j.inherited] == ["ONP4445"] and not j.port


def test_the_same_name_from_another_module_or_another_name_stays_the_ports():
    port = "from w.outputs import Gone\nfrom v.outputs import Lost\n"
    j = _judge(port, [_sym("Gone", 0, 22), _sym("Lost", 1, 22)])
    assert [d.code for d in j.port] == ["ONP4444", "ONP4444"] and not j.inherited


def test_a_relative_import_keeps_its_dots_and_a_missing_module_is_keyed_by_the_module():
    tree = "from ..pkg import (a,\n    b)\nimport gone.mod\n"
    errs = [_sym("b", 1, 4), _sym("gone.mod", 2, 7, "reportMissingImports", "could not be resolved")]
    got = J.checker_errors([{"file": "/m.py", **e} for e in errs], {"/m.py": tree})
    assert [e.statement for e in got] == ["from ..pkg import b", "import gone.mod"]
