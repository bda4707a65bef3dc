"""ONP4551/ONP4552 (issue 32): whether the people keep their copy in step with vllm-ascend depends on the releases
table and the sources given, never on what else the package cache holds. Fixtures: the update fixtures' PREV hand
runner (tests/fixtures/update) and vllm-ascend runners written here, as wheels in tmp caches; nothing is fetched (an
index nobody answers), so the table's other releases are not scored and the line says so."""
from pathlib import Path

from fixture_wheels import fixture_wheel
from omni_npu_port.core.releases import RELEASES
from omni_npu_port.port.release import open_release
from omni_npu_port.port.update_release import ascend_in_step, ascend_releases, class_methods

UPD = Path(__file__).parent / "fixtures" / "update"
PREV = f"{UPD / 'omni_prev'}@0.16.0"   # pairs with 0.15.0rc1 and 0.16.0rc1; to 0.18.0 the window is 0.14.0rc1-0.18.0
HAND = class_methods((UPD / "omni_prev/vllm_omni/platforms/npu/worker/npu_model_runner.py").read_text(),
                     "OmniNPUModelRunner")
NOBODY = "http://127.0.0.1:9/"
# a runner one hand method partly copies (3 of its 5 lines): the release PREV pairs with
PINNED = ("class NPUModelRunner:\n    def _update_states(self, scheduler_output):\n"
          "        for req_id in scheduler_output.finished_req_ids:\n            self.requests.pop(req_id, None)\n"
          "        self.ascend_only = 1\n        return 0\n")
# a runner the hand methods copy whole: whichever release it is, it scores highest
COPIED = "class NPUModelRunner:\n" + "".join("\n".join("    " + l for l in t.split("\n")) + "\n"
                                            for t in HAND.values())


def _cache(tmp: Path, name: str, runners: dict) -> Path:
    "A package cache holding one fixture vllm-ascend wheel per release (`runners`: version -> its runner module)."
    cache = tmp / name
    cache.mkdir()
    for version, text in runners.items():
        src = tmp / f"src-{name}-{version}"
        (src / "vllm_ascend" / "worker").mkdir(parents=True)
        (src / "vllm_ascend" / "__init__.py").write_text("")
        (src / "vllm_ascend" / "worker" / "__init__.py").write_text("")
        (src / "vllm_ascend" / "worker" / "model_runner_v1.py").write_text(text)
        fixture_wheel(src, cache / f"vllm_ascend-{version}-py3-none-any.whl")
    return cache


def _step(cache: Path):
    tree = open_release(PREV, None, cache, NOBODY)
    return ascend_in_step(tree, "0.18.0", None, cache, NOBODY)


def test_the_releases_scored_are_the_tables_whatever_the_cache_holds():
    assert ascend_releases() == [a for a in RELEASES.ascend if a != "main"]
    assert "0.17.5rc1" not in ascend_releases()


def test_an_extra_release_in_the_cache_does_not_change_the_verdict(tmp_path):
    plain = _cache(tmp_path, "plain", {"0.16.0rc1": PINNED})
    extra = _cache(tmp_path, "extra", {"0.16.0rc1": PINNED, "0.17.5rc1": COPIED})   # not a release of the table
    (a, said_a), (b, said_b) = _step(plain), _step(extra)
    assert a is True and b is True                                  # in step with the release PREV pairs with
    assert [d.code for d in said_a] == [d.code for d in said_b] == ["ONP4551"]
    assert said_a[0].message == said_b[0].message                   # the same line: 0.17.5rc1 is never read
    assert "0.17.5rc1" not in said_b[0].message
    assert "not scored: 0.14.0rc1, 0.15.0rc1, 0.17.0rc1" in said_a[0].message   # not to be had here: said


def test_a_release_of_the_table_the_copy_follows_better_still_counts(tmp_path):
    lagging = _cache(tmp_path, "lag", {"0.16.0rc1": PINNED, "0.17.0rc1": COPIED})   # a table row, not PREV's pin
    step, said = _step(lagging)
    assert step is False and [d.code for d in said] == ["ONP4552"]
    assert "most alike vllm-ascend 0.17.0rc1" in said[0].message
