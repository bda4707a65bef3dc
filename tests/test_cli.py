"""`omni-npu-port` dispatch, catalog, profile and tour, called as a user would."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from omni_npu_port.core.catalog import CATALOG, FAMILIES
from omni_npu_port.cli.main import COMMANDS, build_parser, command_module, main


def catalog_main(args):
    return main(["catalog", *args])


def profile_main(args):
    return main(["profile", *args])


def test_console_script_runs():
    from importlib.metadata import entry_points
    eps = [e for e in entry_points(group="console_scripts") if e.name == "omni-npu-port"]
    assert eps and eps[0].value == "omni_npu_port.cli.main:entry"
    exe = __import__("shutil").which("omni-npu-port", path=str(__import__("pathlib").Path(sys.executable).parent))
    r = subprocess.run([exe, "catalog", "--json", "--family", "attention"], capture_output=True, text=True)
    assert r.returncode == 0 and {x["id"] for x in json.loads(r.stdout)} == {p.id for p in CATALOG.select(family="attention")}
    r = subprocess.run([exe, "nonsense"], capture_output=True, text=True)     # the exit code comes through entry
    assert r.returncode == 2 and "unknown command" in r.stderr


def test_main_leaves_the_garbage_collector_alone_and_entry_freezes_only_at_the_end():
    import gc
    assert main(["--version"]) == 0 and gc.isenabled() and gc.get_freeze_count() == 0
    r = subprocess.run([sys.executable, "-c", "import gc, sys; from omni_npu_port.cli import main as cli; sys.argv = ['x', '--version'];"
                        " rc = cli.entry(); print(rc, gc.isenabled(), gc.get_freeze_count() > 0)"], capture_output=True, text=True)
    assert r.stdout.split()[-3:] == ["0", "True", "True"]


def test_entry_runs_port_without_the_cyclic_collector(tmp_path):
    "A `port` command's objects live until the process ends: the console script runs it with no collection at all."
    fix = Path(__file__).parent / "fixtures" / "release"
    probe = ("import gc, sys; from omni_npu_port.cli import main as cli\n"
             "n = []; gc.callbacks.append(lambda phase, info: n.append(phase))\n"
             f"sys.argv = ['omni-npu-port', 'port', '--release', {str(fix / 'omni')!r}, '--source', {str(fix / 'vllm')!r},"
             f" {str(fix / 'vllm_ascend')!r}, {str(fix / 'vllm_old')!r}, '--history', '0.17.0', '-o', {str(tmp_path / 'out')!r}]\n"
             "rc = cli.entry(); print(rc, len(n), gc.isenabled())")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert r.stdout.split()[-3:] == ["0", "0", "False"], r.stderr
    assert (tmp_path / "out" / "port-report.json").is_file()


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(c in out for c in COMMANDS)
    assert main([]) == 2


def test_unknown_command(capsys):
    assert main(["translat"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'translat'" in err and "catalog" in err


def test_every_command_is_a_cli_module():
    "Each command is a module omni_npu_port.cli.<name> with DESCRIPTION, configure and run, and its options build."
    for name in COMMANDS:
        mod = command_module(name)
        assert mod.__name__ == f"omni_npu_port.cli.{name}"
        assert callable(mod.configure) and callable(mod.run) and mod.DESCRIPTION, name
        assert name in build_parser(configure_only=name).format_help(), name


def test_usage_errors_look_the_same_in_every_command(capsys):
    "An unknown option is one line `omni-npu-port CMD: error: ...` and exit 2, whichever command it is."
    for name in COMMANDS:
        assert main([name, "--no-such-option"]) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"omni-npu-port {name}: error: unrecognized arguments"), (name, err)


def test_catalog_json_all_fields(capsys):
    assert main(["catalog", "--json"]) == 0
    recs = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in recs] == [p.id for p in CATALOG]
    for key in ("id", "family", "title", "gpu", "npu", "kind", "since", "until", "notes"):
        assert key in recs[0]


@pytest.mark.parametrize("target", ["vllm-ascend==0.18.0", "vllm-ascend==0.23.0.post1", "vllm==0.34.0"])
def test_catalog_target_filters(capsys, target):
    assert catalog_main(["--json", "--target", target]) == 0
    ids = {r["id"] for r in json.loads(capsys.readouterr().out)}
    pkg, ver = target.split("==")
    assert ids == {p.id for p in CATALOG if p.holds_for(**{pkg.replace("-", "_"): ver})}
    assert ids != {p.id for p in CATALOG}


@pytest.mark.parametrize("args,expect", [
    (["--family", "graph"], "choose one of: " + ", ".join(FAMILIES)),
    (["--target", "vllm-ascend==banana"], "known versions:"),
    (["--target", "0.18.0"], "must look like vllm-ascend==X"),
])
def test_catalog_bad_input_exits_2_with_choices(capsys, args, expect):
    assert catalog_main(args) == 2
    err = capsys.readouterr().err
    assert expect in err and "Traceback" not in err


def test_catalog_table_shows_every_id_of_a_family(capsys):
    assert catalog_main(["--family", "device-ops"]) == 0
    out = capsys.readouterr().out
    for p in CATALOG.select(family="device-ops"):
        assert p.id in out


def test_profile_json_and_env(capsys, monkeypatch):
    monkeypatch.setenv("OMNI_NPU_PORT_RUNTIME_BACKEND", "cpu")
    assert profile_main(["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["values"]["runtime.backend"] == "cpu" and d["origins"]["runtime.backend"] == "$OMNI_NPU_PORT_RUNTIME_BACKEND"


def test_profile_bad_env_exits_3(capsys, monkeypatch):
    "A bad profile is an input/environment failure: exit 3 (core.errors' map), one line naming the key."
    monkeypatch.setenv("OMNI_NPU_PORT_BENCH_DTYPE", "fp4")
    assert profile_main([]) == 3
    assert "dtype" in capsys.readouterr().err


@pytest.fixture
def platform_chosen_again():
    "The runtime's platform is chosen afresh in the test (from the environment it sets) and again after it."
    from omni_npu_port.runtime.platform import reset_platform
    reset_platform()
    yield
    reset_platform()


def test_tour_runs_every_step_on_cpu(tmp_path, monkeypatch, platform_chosen_again):
    "The tour run by `main` in this process (the command's work, not an interpreter start), on the cpu backend."
    from cli_helpers import run
    monkeypatch.setenv("OMNI_NPU_PORT_RUNTIME_BACKEND", "cpu")
    monkeypatch.setenv("COLUMNS", "200")
    rc, out, err = run(["tour"])
    assert rc == 0, out + err
    assert "backend: cpu" in out
    assert f"catalog: {len(CATALOG)} patterns" in out
    assert "gpu_runner_example.py for vllm-ascend==" in out and "+from vllm_ascend" in out and "more hunks" in out
    assert "next steps:" in out
    assert "docs site:" in out
    assert "every step ran" in out


def test_tour_on_a_missing_npu_says_how_to_install_and_goes_on(monkeypatch, platform_chosen_again):
    from cli_helpers import run
    monkeypatch.setenv("OMNI_NPU_PORT_RUNTIME_BACKEND", "npu")
    monkeypatch.setenv("COLUMNS", "400")
    rc, out, err = run(["tour", "--skip", "benchmark", "--skip", "translate"])
    assert rc == 1 and "Traceback" not in out + err
    assert "backend step failed" in out and "pip install 'omni-npu-port[npu]'" in out
    assert "catalog:" in out  # the remaining steps still ran
