"Tests for omni_npu_port.runtime.platform: selection, catalog-driven symbols, real CPU device ops, versions."
from __future__ import annotations

import ast
import dataclasses
import importlib
import os
import subprocess
import sys
import time
import types

import pytest
import torch

import omni_npu_port.runtime.platform as plat
from omni_npu_port.core.catalog import CATALOG
from omni_npu_port.runtime.platform import (DEVICE_OPS, CpuPlatform, CudaPlatform, GraphsUnsupported, NpuPlatform,
                                    PlatformUnavailable, UnresolvedSymbol, capture_replay, cann_version,
                                    check_device_ops, current_platform, get_platform, npu_import_hint,
                                    package_version, reset_platform, resolve_symbol, versions)

TORCH_NPU = CATALOG["dev.torch-npu-import"].npu_symbol
HAS_CUDA = torch.cuda.is_available()


@pytest.fixture(autouse=True)
def fresh_platform(monkeypatch):
    "Every test starts with no cached platform, no CANN env and no backend override."
    for var in ("OMNI_NPU_PORT_RUNTIME_BACKEND", "OMNI_NPU_PORT_SETTINGS", *plat.CANN_ENV_VARS):
        monkeypatch.delenv(var, raising=False)
    reset_platform()
    yield
    reset_platform()


def fail_torch_npu_import(monkeypatch, err: BaseException) -> list:
    "Make the platform's import hook raise `err` for torch_npu (others import for real); return requested names."
    requested, real = [], plat._import

    def _import(name):
        requested.append(name)
        if name == TORCH_NPU: raise err
        return real(name)
    monkeypatch.setattr(plat, "_import", _import)
    return requested


class NpuModuleDouble(types.SimpleNamespace):
    "Test double for torch_npu's `torch.npu` module: records the calls the platform makes."
    def __init__(self, count=1):
        super().__init__(calls=[], count=count)
    def is_available(self): return self.count > 0
    def device_count(self): return self.count
    def synchronize(self, device=None): self.calls.append(("synchronize", device))
    def memory_allocated(self, device=None): self.calls.append(("memory_allocated", device)); return 123
    def mem_get_info(self, device=None): self.calls.append(("mem_get_info", device)); return [4, 8]
    def graph_pool_handle(self): self.calls.append(("graph_pool_handle",)); return ("pool", 0)


@pytest.fixture
def npu_present(monkeypatch):
    "A process where `import torch_npu` succeeds and registers `torch.npu` (both doubles) with one device."
    torch_npu_double = types.ModuleType("torch_npu_double")
    npu_double = NpuModuleDouble()
    real, requested = plat._import, []

    def _import(name):
        requested.append(name)
        if name == TORCH_NPU:
            monkeypatch.setattr(torch, "npu", npu_double, raising=False)  # what the real import does
            return torch_npu_double
        return real(name)
    monkeypatch.setattr(plat, "_import", _import)
    npu_double.requested = requested
    return npu_double


# --- importing stays light -------------------------------------------------------------------------------

def test_import_and_cpu_use_do_not_load_torch_npu_or_vllm():
    code = ("import sys, omni_npu_port.runtime.platform as m; p = m.get_platform('auto'); m.check_device_ops(m.get_platform('cpu')); "
            "m.versions(); p.describe(); "
            "print(sorted(x for x in ('torch_npu', 'vllm', 'vllm_ascend', 'vllm_omni') if x in sys.modules))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMNI_NPU_PORT_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def _dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute): parts.append(node.attr); node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def test_module_code_names_no_device_symbols_and_patches_nothing():
    "Device-op names live in the catalog: the module's code neither spells torch.cuda.X / torch.npu.X nor patches."
    tree = ast.parse(open(plat.__file__).read())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    names = {_dotted(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
               and id(n) not in docstrings]
    assert not [d for d in names if d.startswith(("torch.cuda.", "torch.npu.", "torch_npu."))]
    assert not [s for s in strings if any(k in s for k in ("torch.cuda.", "torch.npu.", "transfer_to_npu", "vllm_ascend."))]
    assert "transfer_to_npu" not in open(plat.__file__).read()


# --- resolve_symbol --------------------------------------------------------------------------------------

def test_resolve_symbol_walks_attributes_and_imports_submodules():
    assert resolve_symbol("torch.cuda.synchronize") is torch.cuda.synchronize
    import xml.dom.minidom
    assert resolve_symbol("xml.dom.minidom.parseString") is xml.dom.minidom.parseString


def test_resolve_symbol_names_what_is_missing():
    if not hasattr(torch, "npu"):
        with pytest.raises(UnresolvedSymbol, match=r"'torch\.npu\.synchronize'.*torch has no attribute 'npu'"):
            resolve_symbol("torch.npu.synchronize")
    with pytest.raises(UnresolvedSymbol, match="no_such_pkg_xyz"):
        resolve_symbol("no_such_pkg_xyz.f")
    with pytest.raises(UnresolvedSymbol, match="os.path has no attribute 'nope'"):
        resolve_symbol("os.path.nope")


# --- symbols come from the catalog -------------------------------------------------------------------------

@pytest.mark.parametrize("record_id", DEVICE_OPS)
def test_device_platforms_read_their_side_of_each_record(record_id):
    assert CudaPlatform.symbol(record_id) == CATALOG[record_id].gpu_symbol
    assert NpuPlatform.symbol(record_id) == CATALOG[record_id].npu_symbol
    assert CudaPlatform.resolve(record_id) is resolve_symbol(CATALOG[record_id].gpu_symbol)


def test_cuda_platform_ops_resolve_the_torch_cuda_functions():
    cu = CudaPlatform()  # constructed directly: resolving needs no GPU, calling would
    assert cu.op("dev.synchronize") is torch.cuda.synchronize
    assert cu.op("dev.graph-class") is torch.cuda.CUDAGraph is cu.graph_cls
    assert cu.op("dev.stream") is torch.cuda.Stream and cu.op("dev.event") is torch.cuda.Event
    assert cu.symbols() == {rid: CATALOG[rid].gpu_symbol for rid in DEVICE_OPS}


def test_a_changed_record_changes_what_the_platform_calls(monkeypatch):
    rec = dataclasses.replace(CATALOG["dev.synchronize"], gpu_symbol="os.getcwd")
    monkeypatch.setattr(plat, "CATALOG", {**{r: CATALOG[r] for r in DEVICE_OPS}, "dev.synchronize": rec})
    assert CudaPlatform.resolve("dev.synchronize") is os.getcwd


def test_missing_symbol_in_record_is_reported(monkeypatch):
    rec = dataclasses.replace(CATALOG["dev.synchronize"], npu_symbol=None)
    monkeypatch.setattr(plat, "CATALOG", {"dev.synchronize": rec})
    with pytest.raises(KeyError, match="dev.synchronize has no npu_symbol"):
        NpuPlatform.symbol("dev.synchronize")


# --- selection -------------------------------------------------------------------------------------------

@pytest.mark.skipif(HAS_CUDA, reason="auto picks CUDA on a GPU host")
def test_auto_falls_back_to_cpu_with_reasons():
    p = get_platform("auto")
    assert isinstance(p, CpuPlatform) and p.device == torch.device("cpu") and p.dist_backend == "gloo"
    why = p.not_chosen()
    assert "torch_npu is not importable" in why["npu"] or "finds no NPU" in why["npu"]
    assert "CUDA backend unavailable" in why["cuda"]


def test_current_platform_reads_profile_once_and_caches(monkeypatch, tmp_path):
    ini = tmp_path / "settings.ini"
    ini.write_text("[runtime]\nbackend = cpu\n")
    monkeypatch.setenv("OMNI_NPU_PORT_SETTINGS", str(ini))
    p = current_platform()
    assert p.name == "cpu" and str(ini) in p.selected_by
    ini.write_text("[runtime]\nbackend = npu\n")
    assert current_platform() is p  # chosen once per process
    reset_platform()
    fail_torch_npu_import(monkeypatch, ModuleNotFoundError("No module named 'torch_npu'", name=TORCH_NPU))
    with pytest.raises(PlatformUnavailable, match="torch_npu is not importable"):
        current_platform()


def test_env_override_beats_the_profile(monkeypatch, tmp_path):
    ini = tmp_path / "settings.ini"
    ini.write_text("[runtime]\nbackend = npu\n")
    monkeypatch.setenv("OMNI_NPU_PORT_SETTINGS", str(ini))
    monkeypatch.setenv("OMNI_NPU_PORT_RUNTIME_BACKEND", "cpu")
    p = current_platform()
    assert p.name == "cpu" and "$OMNI_NPU_PORT_RUNTIME_BACKEND" in p.selected_by
    reset_platform()
    assert current_platform() is not p


def test_unknown_backend_is_a_value_error():
    with pytest.raises(ValueError, match="unknown backend 'tpu'.*auto, npu, cuda, cpu"):
        get_platform("tpu")


def test_missing_torch_npu_message(monkeypatch):
    requested = fail_torch_npu_import(monkeypatch, ModuleNotFoundError("No module named 'torch_npu'", name=TORCH_NPU))
    with pytest.raises(PlatformUnavailable) as ei:
        get_platform("npu")
    msg = str(ei.value)
    assert "\n" not in msg and TORCH_NPU in requested
    assert msg.startswith("NPU backend unavailable: torch_npu is not importable: ModuleNotFoundError: No module named 'torch_npu'; ")
    assert "install CANN" in msg and "ascend-toolkit/set_env.sh" in msg and "pip install 'omni-npu-port[npu]'" in msg


def test_libhccl_without_cann_env_says_set_env_was_not_sourced(monkeypatch):
    fail_torch_npu_import(monkeypatch, ImportError("libhccl.so: cannot open shared object file: No such file or directory"))
    with pytest.raises(PlatformUnavailable) as ei:
        get_platform("npu")
    msg = str(ei.value)
    assert "\n" not in msg and "libhccl.so" in msg
    assert "ASCEND_TOOLKIT_HOME and ASCEND_HOME_PATH are unset" in msg and "set_env.sh" in msg


def test_libhccl_with_cann_env_points_at_library_path():
    msg = npu_import_hint("torch_npu", ImportError("libhccl.so: cannot open shared object file"),
                          {"ASCEND_HOME_PATH": "/opt/cann"})
    assert "CANN is set at /opt/cann" in msg and "/opt/cann/lib64" in msg and "unset" not in msg


def test_npu_chosen_by_auto_when_torch_npu_imports_and_a_device_exists(npu_present):
    p = get_platform("auto")
    assert isinstance(p, NpuPlatform) and p.dist_backend == "hccl" and p.supports_graphs
    assert TORCH_NPU in npu_present.requested
    p.synchronize()
    assert p.memory_allocated() == 123 and p.mem_get_info() == (4, 8)
    assert p.graph_pool_handle() == ("pool", 0)
    assert npu_present.calls == [("synchronize", 0), ("memory_allocated", 0), ("mem_get_info", 0), ("graph_pool_handle",)]


def test_npu_without_device_is_skipped_by_auto_and_refused_explicitly(npu_present):
    npu_present.count = 0
    assert get_platform("auto").name != "npu"
    with pytest.raises(PlatformUnavailable, match=r"torch_npu imports but torch\.npu\.device_count\(\) finds no NPU"):
        get_platform("npu")


@pytest.mark.skipif(HAS_CUDA, reason="CUDA is present")
def test_explicit_cuda_absent_names_the_cpu_build():
    with pytest.raises(PlatformUnavailable) as ei:
        get_platform("cuda")
    msg = str(ei.value)
    assert "\n" not in msg and "torch.cuda.is_available() is False" in msg and torch.__version__ in msg


# --- every CPU op, for real ------------------------------------------------------------------------------

def test_cpu_check_device_ops_runs_everything():
    r = check_device_ops(get_platform("cpu"), n=64)
    assert r["result_ok"] and r["device"] == "cpu" and r["device_count"] == 1 and r["device_name"]
    assert r["matmul_ms"] > 0
    assert r["max_memory_allocated"] >= r["memory_allocated"] > 0
    assert 0 < r["mem_free"] <= r["mem_total"]


def test_cpu_streams_are_torch_cpu_streams():
    cpu = get_platform("cpu")
    cpu.synchronize()
    s, before = cpu.Stream(device=cpu.device), cpu.current_stream()
    assert isinstance(s, torch.cpu.Stream)
    with cpu.stream(s):
        assert cpu.current_stream() is s
    assert cpu.current_stream() is before


def test_cpu_event_times_wall_clock():
    cpu = get_platform("cpu")
    a, b = cpu.Event(enable_timing=True), cpu.Event(enable_timing=True)
    t0 = time.perf_counter()
    a.record(); time.sleep(0.03); b.record(); b.synchronize()
    around_ms = (time.perf_counter() - t0) * 1000   # the wall time around both records bounds it: ms, not s or µs
    assert a.query() and 25 <= a.elapsed_time(b) <= around_ms
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        cpu.Event().elapsed_time(b)
    with pytest.raises(RuntimeError, match="recorded"):
        cpu.Event(enable_timing=True).elapsed_time(b)


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc")
def test_cpu_peak_memory_tracks_and_resets():
    cpu = get_platform("cpu")
    cpu.reset_peak_memory_stats()
    base = cpu.max_memory_allocated()
    big = torch.ones(96 * 2**20, dtype=torch.uint8)
    big += 1
    peak = cpu.max_memory_allocated()
    assert peak >= base + 64 * 2**20
    del big
    cpu.empty_cache()
    cpu.reset_peak_memory_stats()
    assert cpu.max_memory_allocated() < peak


def test_cpu_has_no_graphs():
    cpu = get_platform("cpu")
    assert cpu.supports_graphs is False and cpu.graph_cls is None
    with pytest.raises(GraphsUnsupported, match="need CUDA or an Ascend NPU"):
        with cpu.graph(None): pass
    with pytest.raises(GraphsUnsupported, match="graph_pool_handle"):
        cpu.graph_pool_handle()
    with pytest.raises(GraphsUnsupported):
        capture_replay(cpu, torch.nn.Identity(), torch.ones(2), torch.ones(2))


def test_cpu_describe():
    d = get_platform("cpu").describe()
    assert d["backend"] == "cpu" and d["device"] == "cpu" and d["supports_graphs"] is False
    assert set(d["not_chosen"]) == {"npu", "cuda"} and all(d["not_chosen"].values())
    assert d["versions"]["torch"] and d["symbols"] == {}


# --- versions --------------------------------------------------------------------------------------------

def test_versions_from_metadata_without_importing_torch_npu(monkeypatch):
    fail_torch_npu_import(monkeypatch, AssertionError("versions() must not import torch_npu"))
    v = versions({})
    assert set(v) == {"torch", "torch_npu", "CANN", "vllm", "vllm-ascend", "vllm-omni"}
    assert v["torch"].split("+")[0] == torch.__version__.split("+")[0]
    assert v["torch_npu"] == package_version("torch-npu")
    assert package_version("pytest") == pytest.__version__ and package_version("no-such-dist-xyz") is None


def test_cann_version_from_toolkit_files(monkeypatch, tmp_path):
    monkeypatch.setattr(plat, "CANN_DEFAULT_HOME", str(tmp_path / "absent"))
    assert cann_version({}) is None
    home = tmp_path / "latest"
    (home / "aarch64-linux").mkdir(parents=True)
    (home / "version.cfg").write_text("# version: 1.0\nruntime_running_version=[7.5.0.1.129:8.0.0]\n")
    assert cann_version({"ASCEND_TOOLKIT_HOME": str(home)}) == "8.0.0"
    (home / "aarch64-linux" / "ascend_toolkit_install.info").write_text("package_name=Ascend-cann-toolkit\nversion=8.1.RC1\n")
    assert cann_version({"ASCEND_HOME_PATH": str(home)}) == "8.1.RC1"
    assert versions({"ASCEND_TOOLKIT_HOME": str(home)})["CANN"] == "8.1.RC1"


# --- on a GPU --------------------------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_cuda_ops_and_graph_parity():
    cu = get_platform("cuda")
    r = check_device_ops(cu)
    assert r["result_ok"] and r["device_count"] >= 1 and 0 < r["mem_free"] <= r["mem_total"]
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.SiLU(), torch.nn.Linear(128, 64)).to(cu.device).eval()
    x, new_x = torch.randn(4, 64, device=cu.device), torch.randn(4, 64, device=cu.device)
    g, y = capture_replay(cu, mlp, x, new_x)
    assert isinstance(g, torch.cuda.CUDAGraph)
    with torch.no_grad():
        torch.testing.assert_close(y, mlp(new_x))


def test_runtime_errors_carry_exit_codes_and_keep_their_builtin_bases():
    from omni_npu_port.core.errors import InputError, UsageError, exit_code_of
    from omni_npu_port.runtime.platform import GraphsUnsupported, PlatformUnavailable, UnresolvedSymbol
    from omni_npu_port.runtime.sampler_batch import RunnerClassUnavailable
    from omni_npu_port.runtime.signatures import UnsupportedKeyword, UnsupportedVersion
    for cls, base, code in ((PlatformUnavailable, RuntimeError, 3), (GraphsUnsupported, RuntimeError, 3),
                            (UnresolvedSymbol, ImportError, 3), (RunnerClassUnavailable, ImportError, 3),
                            (UnsupportedVersion, LookupError, 3), (UnsupportedKeyword, TypeError, 2)):
        err = cls("x")
        assert isinstance(err, base) and isinstance(err, UsageError if code == 2 else InputError), cls
        assert exit_code_of(err) == code, cls
