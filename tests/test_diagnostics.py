"""One diagnostics registry: every ONP code raised is registered, every registered code is raised and documented."""
from pathlib import Path

from omni_npu_port.core.diagnostics import SEVERITIES
from omni_npu_port.docs.codes import all_codes, raised_codes, registry_problems

ROOT = Path(__file__).resolve().parents[1]


def test_registry_is_whole():
    problems = registry_problems()
    assert not problems, "the diagnostics registry and the code disagree:\n" + "\n".join(problems)


def test_an_unregistered_code_is_caught(tmp_path):
    "The check is not vacuous: a module that raises a code nobody registered is named, with its line."
    pkg = tmp_path / "omni_npu_port"
    pkg.mkdir()
    (pkg / "rogue.py").write_text('x = 1\nd = Diagnostic("ONP7777", "never registered")\nc = Code("ONP7778", "n", "t", "info")\n')
    raised = raised_codes(pkg)
    assert raised == {"ONP7777": ["omni_npu_port/rogue.py:2"]}   # a registration is not a use
    assert any(p.startswith("ONP7777 is raised at omni_npu_port/rogue.py:2") for p in registry_problems(pkg))


def test_every_code_says_what_to_do_and_where_it_is_explained():
    codes = all_codes()
    assert len(codes) >= 40
    for c in codes.values():
        assert c.title and c.tool and c.severity in SEVERITIES, c
        assert c.action, f"{c.code} has no action (what a person does about it)"
        assert c.notebook and (ROOT / "nbs" / c.notebook).is_file(), f"{c.code}: notebook {c.notebook!r} not in nbs/"
