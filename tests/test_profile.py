"""The porting profile: settings.ini, environment overrides, clear errors."""
import configparser
from pathlib import Path

import pytest

from omni_npu_port.core.profile import SCHEMA, ProfileError, find_profile, load_profile

ROOT = Path(__file__).resolve().parents[1]


def write(tmp_path, text):
    f = tmp_path / "settings.ini"
    f.write_text(text)
    return f


def test_project_profile_equals_the_builtin_defaults():
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(ROOT / "settings.ini")
    assert {(s, k): cp[s][k] for s in cp.sections() for k in cp[s]} == {sk: d for sk, (d, _, _) in SCHEMA.items()}
    p = load_profile(ROOT / "settings.ini", env={})
    assert p.backend == "auto" and p.batch_sizes == (1, 2, 4, 8, 16, 32) and p.dtype == "bfloat16"


def test_no_file_gives_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert find_profile(env={}) is None
    p = load_profile(env={})
    assert p.path is None and all(v == "default" for v in p.origins.values())
    assert p.vllm_ascend == SCHEMA["stack", "vllm_ascend"][0]


def test_find_walks_up_and_skips_foreign_settings(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    prof = write(tmp_path, "[runtime]\nbackend = cpu\n")
    (tmp_path / "a" / "settings.ini").write_text("[DEFAULT]\nlib_name = old_nbdev_project\n")
    assert find_profile(tmp_path / "a" / "b", env={}) == prof


def test_env_var_settings_path(tmp_path):
    f = write(tmp_path, "[bench]\niters = 7\n")
    assert load_profile(env={"OMNI_NPU_PORT_SETTINGS": str(f)}).iters == 7
    with pytest.raises(ProfileError, match="not a file"):
        find_profile(env={"OMNI_NPU_PORT_SETTINGS": str(tmp_path / "missing.ini")})


def test_env_overrides_file_and_origins(tmp_path):
    f = write(tmp_path, "[runtime]\nbackend = cuda\n[bench]\nwarmup = 2\n")
    p = load_profile(f, env={"OMNI_NPU_PORT_RUNTIME_BACKEND": "cpu"})
    assert p.backend == "cpu" and p.origins["runtime.backend"] == "$OMNI_NPU_PORT_RUNTIME_BACKEND"
    assert p.warmup == 2 and p.origins["bench.warmup"] == f"{f}:4"
    assert p.origins["bench.iters"] == "default"


@pytest.mark.parametrize("text,expect", [
    ("[runtime]\nbackend = tpu\n", r"\[runtime\] backend = 'tpu' is not valid; allowed: one of auto, npu, cuda, cpu"),
    ("[bench]\nbatch_sizes = 8,4\n", r"batch_sizes.*increasing order"),
    ("[bench]\nbatch_sizes = 1,0\n", r"batch_sizes"),
    ("[bench]\niters = many\n", r"iters = 'many'.*integer"),
    ("[bench]\ndtype = fp8\n", r"dtype.*bfloat16"),
    ("[stack]\nvllm_ascend = latest\n", r"vllm_ascend = 'latest' is not valid; allowed: a vllm-ascend version.*0.13.0rc2"),
    ("[bench]\nitres = 3\n", r"unknown key 'itres' in \[bench\]; allowed keys: batch_sizes, warmup, iters, dtype"),
    ("[stak]\nvllm = 0.18.0\n", r"unknown section \[stak\]"),
    ("[runtime\nbackend = cpu\n", r"cannot read the porting profile"),
])
def test_bad_values_name_file_section_key_and_allowed(tmp_path, text, expect):
    f = write(tmp_path, text)
    with pytest.raises(ProfileError, match=expect) as ei:
        load_profile(f, env={})
    assert str(f) in str(ei.value)


def test_bad_env_value_names_the_variable(tmp_path):
    f = write(tmp_path, "[runtime]\nbackend = cpu\n")
    with pytest.raises(ProfileError, match=r"\$OMNI_NPU_PORT_BENCH_WARMUP: \[bench\] warmup = '-1'"):
        load_profile(f, env={"OMNI_NPU_PORT_BENCH_WARMUP": "-1"})


def test_target_string():
    assert load_profile(None, env={"OMNI_NPU_PORT_STACK_VLLM_ASCEND": "v0.23.0"}).target == "vllm-ascend==0.23.0"


def test_target_release_order_explicit_source_installed_profile():
    from omni_npu_port.core.profile import target_release
    prof = load_profile(None, env={"OMNI_NPU_PORT_STACK_VLLM_ASCEND": "0.23.0.post1"})
    assert target_release(profile=prof) == "0.23.0.post1"
    assert target_release(installed="0.18.0", profile=prof) == "0.18.0"
    assert target_release(source_version="0.20.2rc1", installed="0.18.0", profile=prof) == "0.20.2rc1"
    assert target_release("vllm-ascend==0.25.1rc1", "0.20.2rc1", "0.18.0", prof) == "0.25.1rc1"
    with pytest.raises(ProfileError, match="vllm-ascend==X"):
        target_release("vllm==0.18.0")


def test_profile_error_is_an_input_error_and_a_value_error():
    from omni_npu_port.core.errors import InputError, exit_code_of
    err = ProfileError("x")
    assert isinstance(err, InputError) and isinstance(err, ValueError) and exit_code_of(err) == 3


@pytest.mark.parametrize("version", ["0.11.0rc2", "0.26.0rc1", "0.99.0", "main"])
def test_profile_takes_any_vllm_ascend_version(tmp_path, version):
    f = write(tmp_path, f"[stack]\nvllm_ascend = {version}\n")
    assert load_profile(f, env={}).target == f"vllm-ascend=={version}"


def test_resolve_target_names_the_release_used_and_any_substitution():
    from omni_npu_port.core.catalog import VLLM_ASCEND_VERSIONS
    from omni_npu_port.core.profile import resolve_target
    from omni_npu_port.core.releases import RELEASES
    prof = load_profile(None, env={"OMNI_NPU_PORT_STACK_VLLM_ASCEND": "0.11.0rc2"})
    first = VLLM_ASCEND_VERSIONS[0]
    t = resolve_target(profile=prof)
    assert t.release == first and f"0.11.0rc2 is older than the catalog's first release {first}" in t.warning
    assert t.origin == "the profile: $OMNI_NPU_PORT_STACK_VLLM_ASCEND"
    t = resolve_target("vllm-ascend==0.26.0rc1", profile=prof)
    assert (t.release, t.warning, t.origin) == ("0.26.0rc1", None, "--target")
    latest = RELEASES.latest                      # from the releases table, never a literal
    t = resolve_target(source_version=f"{latest}.post99", profile=prof)
    assert t.release == latest and f"{latest}.post99" in t.warning and t.origin == "inferred from the source"
    with pytest.raises(ProfileError, match="not a version"): resolve_target("vllm-ascend==nine")
