"""Kept translations (issue 33, speed: `translate.kept`): each file's result kept between runs, keyed by its bytes and
all that decides it. A hit is byte for byte a fresh run's result; a changed rule, target or option misses; a damaged
entry is a miss, said and written anew; what the tool did not write is never touched. Fixtures written here."""
import json
import os
from pathlib import Path

import pytest

from omni_npu_port.cli.main import main
from omni_npu_port.translate import kept as kmod
from omni_npu_port.translate.derived import module_reader, probes_hold, recorded_probes
from omni_npu_port.translate.engine import compile_rules, translate_source
from omni_npu_port.translate.kept import FILE_FORMAT, QUIET_FORMAT, KeptFiles, bound_folder, file_key, quiet
from omni_npu_port.translate.kept import quiet_key, read_entry
from omni_npu_port.translate.run import translate_paths

T18, T13 = "vllm-ascend==0.18.0", "vllm-ascend==0.13.0"
GPU = "import torch\n\n\ndef sync(x):\n    torch.cuda.synchronize()\n    return x.to('cuda')\n"
GPU2 = "import torch\n\nstream = torch.cuda.Stream()\nevent = torch.cuda.Event(enable_timing=True)\n"
QUIET = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def rules():
    return compile_rules(T18)


@pytest.fixture
def tree(tmp_path):
    src = tmp_path / "src"; src.mkdir()
    for name, text in (("a.py", GPU), ("b.py", GPU2), ("c.py", QUIET)): (src / name).write_text(text)
    (src / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nimport torch\nNAME = '\xe9'\n"
                                   b"torch.cuda.synchronize()\n")
    return src


@pytest.fixture
def counted(monkeypatch):
    "The files `translate.kept` translates anew (its `translate_source`, counted by path)."
    seen, real = [], kmod.translate_source
    def count(data, rules, path, **kw): seen.append(Path(path).name); return real(data, rules, path, **kw)
    monkeypatch.setattr(kmod, "translate_source", count)
    return seen


def _same(t):
    "All of a translation that a run reports or writes."
    return (t.output, [d.to_dict() for d in t.diagnostics], t.error and t.error.to_dict(), t.parsed, t.encoding,
            t.changed, t.lines)


def _kept(tmp_path) -> KeptFiles:
    "Kept files in a fingerprint folder of a claimed cache root (as `kept_files` gives them)."
    from omni_npu_port.core.io import claim_cache
    return KeptFiles(claim_cache(tmp_path / "kept", "translations") / ("0" * 20))


def test_a_hit_is_byte_for_byte_the_fresh_translation(tmp_path, tree, rules, counted):
    k = _kept(tmp_path)
    files = sorted(tree.iterdir())
    fresh = [translate_source(p.read_bytes(), rules, str(p)) for p in files]
    cold = [k.translate(p.read_bytes(), rules, str(p)) for p in files]
    counted.clear()
    warm = [k.translate(p.read_bytes(), rules, str(p)) for p in files]
    assert counted == [] and k.hits == 3 and k.written == 3      # the quiet file is neither kept nor translated
    assert [_same(t) for t in warm] == [_same(t) for t in cold] == [_same(t) for t in fresh]
    assert any(t.changed for t in warm) and isinstance(warm[0].output, bytes)
    for comments in (True, False):   # a whole run, as --check and as -o: the same report, the same files written
        runs = [translate_paths([tree], rules, outdir=tmp_path / f"o{comments}{i}", comments=comments, kept=kx,
                                force=True) for i, kx in enumerate((None, k, k))]
        dicts = [[{**f.to_dict(), "output": None} for f in r.files] for r in runs]
        assert dicts[0] == dicts[1] == dicts[2]
        for f in files:
            outs = [(tmp_path / f"o{comments}{i}" / f.name).read_bytes() for i in range(3)]
            assert outs[0] == outs[1] == outs[2]


def test_a_quiet_file_is_itself_and_only_its_key_is_kept(tmp_path, rules, monkeypatch):
    k = _kept(tmp_path)
    assert quiet(QUIET.encode(), rules) and not quiet(GPU.encode(), rules)
    assert _same(k.translate(QUIET.encode(), rules, "q.py")) == _same(translate_source(QUIET.encode(), rules, "q.py"))
    assert k.written == 0 and not k.folder.exists()       # no entry of its own
    derived = compile_rules(T18); derived.derived = True
    assert not quiet(b"from vllm import x\n", derived) and quiet(b"from vllm import x\n", rules)   # derived: read
    k.finish()
    [entry] = k.folder.glob("*.json")                      # the quiet set of this rule set and option
    assert entry.stem == quiet_key(rules) and read_entry(k.folder, entry.stem, QUIET_FORMAT)["keys"] == \
        [file_key(QUIET.encode(), rules, "q.py")]
    def no_prefilter(*a): raise AssertionError("pre-filtered")
    monkeypatch.setattr(kmod, "quiet", no_prefilter)
    again = KeptFiles(k.folder)                              # a later run: answered from the set
    assert _same(again.translate(QUIET.encode(), rules, "q.py")) == \
        _same(translate_source(QUIET.encode(), rules, "q.py"))
    assert again.quiet_hits == 1
    with pytest.raises(AssertionError, match="pre-filtered"):   # other bytes, or another option: not in the set
        KeptFiles(k.folder).translate((QUIET + "# x\n").encode(), rules, "q.py")
    with pytest.raises(AssertionError, match="pre-filtered"):
        KeptFiles(k.folder).translate(QUIET.encode(), rules, "q.py", False)
    body = json.loads(entry.read_text()); body["body"]["keys"] = [7]; body["sha256"] = kmod._digest(body["body"])
    entry.write_text(json.dumps(body))                     # a set that lists other than keys: read as empty
    with pytest.raises(AssertionError, match="pre-filtered"):
        KeptFiles(k.folder).translate(QUIET.encode(), rules, "q.py")


def test_a_changed_rule_target_or_option_misses(tmp_path, tree, counted):
    k, a = _kept(tmp_path), tree / "a.py"
    r18 = compile_rules(T18)
    k.translate(a.read_bytes(), r18, str(a))
    for data, r, path, comments in ((a.read_bytes(), compile_rules(T13), str(a), True),        # another target
                                    (a.read_bytes(), r18, str(a), False),                       # comments off (--check)
                                    (a.read_bytes(), r18, str(tree / "z.py"), True),            # read as another path
                                    (a.read_bytes() + b"# edited\n", r18, str(a), True)):      # other bytes
        counted.clear()
        k.translate(data, r, path, comments)
        assert counted == [Path(path).name]
    changed = compile_rules(T18)
    changed.records["user.extra"] = next(iter(changed.records.values()))    # a record added at run time
    assert file_key(a.read_bytes(), changed, str(a)) != file_key(a.read_bytes(), r18, str(a))
    derived = compile_rules(T18); derived.derived = True                                          # derived rules on
    assert file_key(a.read_bytes(), derived, str(a)) != file_key(a.read_bytes(), r18, str(a))
    looked = compile_rules(T18, resolve=lambda q: None)          # a re-export lookup: answers from other trees
    assert file_key(a.read_bytes(), looked, str(a)) is None
    counted.clear(); k.translate(a.read_bytes(), r18, str(a)); assert counted == []                # still a hit


@pytest.mark.parametrize("damage", ["not json", "other content", "another format", "not a translation", "a folder"])
def test_a_damaged_entry_is_never_trusted_said_and_written_anew(tmp_path, tree, rules, counted, caplog, damage,
                                                               monkeypatch):
    k, a = _kept(tmp_path), tree / "a.py"
    good = _same(k.translate(a.read_bytes(), rules, str(a)))
    [entry] = k.folder.glob("*.json")
    body = json.loads(entry.read_text())
    if damage == "not json": entry.write_bytes(b"\x00garbage")
    elif damage == "other content":                      # the old hash over new content: a crafted answer
        body["body"]["output"] = "aW1wb3J0IG9z"; entry.write_text(json.dumps(body))
    elif damage == "another format": body["format"] = "omni-npu-port translation 2"; entry.write_text(json.dumps(body))
    elif damage == "not a translation":                  # its hash matches, its content is not a file's translation
        body["body"]["diagnostics"] = [{"code": 1}]
        body["sha256"] = kmod._digest(body["body"]); entry.write_text(json.dumps(body))
    else: entry.unlink(); entry.mkdir()
    monkeypatch.setattr(kmod, "_LOGGED", set())
    counted.clear()
    with caplog.at_level("WARNING", logger="omni_npu_port.translations"):
        again = k.translate(a.read_bytes(), rules, str(a))
    assert _same(again) == good and counted == ["a.py"]
    assert any(str(entry) in r.getMessage() and "translated anew" in r.getMessage() for r in caplog.records)
    if damage == "a folder": assert entry.is_dir(); return   # not a file this tool wrote: left as it is
    assert read_entry(k.folder, entry.stem, FILE_FORMAT) is not None   # replaced by a good one
    counted.clear(); k.translate(a.read_bytes(), rules, str(a)); assert counted == []


def test_what_the_tool_did_not_write_is_never_touched(tmp_path, tree, rules):
    k, a = _kept(tmp_path), tree / "a.py"
    k.folder.mkdir(parents=True)
    theirs = k.folder / "notes.txt"; theirs.write_text("mine")
    target = tmp_path / "elsewhere.txt"; target.write_text("keep")
    key = file_key(a.read_bytes(), rules, str(a))
    (k.folder / f"{key}.json").symlink_to(target)          # a link where the entry goes: not followed, not replaced
    t = k.translate(a.read_bytes(), rules, str(a))
    assert t.changed and k.written == 0 and target.read_text() == "keep" and (k.folder / f"{key}.json").is_symlink()
    for i, text in enumerate((GPU2, GPU + "# one\n", GPU + "# two\n")):
        k.translate(text.encode(), rules, f"m{i}.py")
    assert bound_folder(k.folder, most=0) == 3              # every entry of this tool's goes; nothing else
    assert theirs.read_text() == "mine" and target.read_text() == "keep" and (k.folder / f"{key}.json").is_symlink()


def test_the_folder_is_bounded_least_recently_used_first_and_never_anothers(tmp_path, rules, monkeypatch):
    k = _kept(tmp_path)
    for i in range(8): k.translate((GPU + f"# {i}\n").encode(), rules, f"m{i}.py")
    entries = sorted(k.folder.glob("*.json"))
    size = sum(p.stat().st_size for p in entries)
    for i, p in enumerate(entries): os.utime(p, ns=(10**9 * (i + 1), 10**9 * (i + 1)))
    k.translate((GPU + "# 0\n").encode(), rules, "m0.py")   # a hit: the most recently used again
    hit = max(entries, key=lambda p: p.stat().st_mtime_ns)
    me = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: me + 1)       # the entries now read as another user's: none go
    assert bound_folder(k.folder, most=size // 2) == 0
    monkeypatch.setattr(os, "getuid", lambda: me)
    assert bound_folder(k.folder, most=size) == 0           # within the bound: nothing goes
    gone = bound_folder(k.folder, most=size // 2)
    left = sorted(k.folder.glob("*.json"))
    assert gone and sum(p.stat().st_size for p in left) <= size * 3 // 8 and hit in left
    assert next(p for p in entries if p != hit) not in left   # the least recently used went first


def test_one_edited_file_of_a_tree_is_the_only_one_translated(tmp_path, tree, rules, counted):
    k = _kept(tmp_path)
    first = translate_paths([tree], rules, check=True, kept=k)
    (tree / "b.py").write_text(GPU2 + "torch.cuda.empty_cache()\n")
    counted.clear()
    second = translate_paths([tree], rules, check=True, kept=k)
    assert counted == ["b.py"]
    assert [f.to_dict() for f in first.files if not f.path.endswith("b.py")] == \
           [f.to_dict() for f in second.files if not f.path.endswith("b.py")]
    assert translate_paths([tree], rules, check=True).to_dict() == second.to_dict()


def test_a_probe_of_the_tree_that_changed_is_a_miss(tmp_path):
    pkg = tmp_path / "proj" / "pkg"; pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("class Base:\n    pass\n")
    runner = pkg / "runner.py"; runner.write_text("from pkg.base import Base\n")
    with recorded_probes() as probes:
        assert "Base" in module_reader(runner)("pkg.base")[0]
        assert module_reader(runner)("pkg.missing") is None
    assert probes and probes_hold(probes)
    (pkg / "base.py").write_text("class Base:\n    x = 1\n")              # a file it read changed
    assert not probes_hold(probes)
    with recorded_probes() as probes: module_reader(runner)("pkg.missing")
    assert probes_hold(probes)
    (pkg / "missing.py").write_text("")                                  # a file it looked for is there now
    assert not probes_hold(probes)
    assert not probes_hold([["what", "x", None]]) and not probes_hold([[1, 2]])


def test_kept_entries_from_a_pool_are_the_same(tmp_path, tree, rules, monkeypatch, forks_alone, counted):
    if not forks_alone: return   # ran, and passed, in a child of one thread
    import omni_npu_port.translate.run as tmod
    monkeypatch.setattr(tmod, "_POOL_MIN", 0)
    k = _kept(tmp_path)
    one = translate_paths([tree], rules, check=True).to_dict()
    pooled = translate_paths([tree], rules, check=True, jobs=2, kept=k).to_dict()
    assert k.written == 4 and pooled == one                  # three files' entries and the quiet set
    counted.clear()
    assert translate_paths([tree], rules, check=True, jobs=2, kept=k).to_dict() == one and counted == []


def test_the_cli_keeps_translations_unless_told_not_to(tmp_path, tree, monkeypatch, capsys):
    monkeypatch.setenv("OMNI_NPU_PORT_TRANSLATION_CACHE", str(tmp_path / "tc"))
    args = ["translate", str(tree), "--check", "-q", "--target", T18, "--output-format", "json"]
    assert main([*args, "--no-cache"]) == 1
    fresh = capsys.readouterr().out
    assert not (tmp_path / "tc").exists()
    assert main(args) == 1 and capsys.readouterr().out == fresh
    assert list((tmp_path / "tc").glob("*/*.json"))
    assert main(args) == 1 and capsys.readouterr().out == fresh        # answered from the kept translations
    monkeypatch.setenv("OMNI_NPU_PORT_TRANSLATION_CACHE", "off")
    assert main(args) == 1 and capsys.readouterr().out == fresh


def test_the_package_cache_is_listed_again_only_once_it_changed(tmp_path, monkeypatch):
    ("The derived rules ask for the target's archives for every file: the package cache folder is listed once, and "
     "again only once a file came, went or was renamed there (the profile of a CLI run: a fifth of its time).")
    from omni_npu_port.translate import derived as D
    calls, real = [], D.cached_release
    monkeypatch.setattr(D, "CACHE_DIR", tmp_path / "pkgs")
    monkeypatch.setattr(D, "cached_release", lambda *a, **k: (calls.append(a[1]), real(*a, **k))[1])
    (tmp_path / "pkgs").mkdir()
    r = compile_rules(T18)
    assert [D.target_sources(r) for _ in range(3)] == [None] * 3 and calls == ["vllm-ascend", "vllm"]
    (tmp_path / "pkgs" / "vllm-0.18.0.tar.gz").write_bytes(b"")     # the folder changed: listed again
    assert D.target_sources(r) is None and calls == ["vllm-ascend", "vllm"] * 2
    assert D.target_sources(compile_rules(T13)) is None and len(calls) == 6   # another target: its own answer


def test_a_derived_check_that_ran_out_of_stack_or_memory_is_not_kept(tmp_path, rules, monkeypatch):
    "Its answer (no findings) is the memory or stack left at the time, not the file's: recorded, never kept."
    from omni_npu_port.sources.readers import open_source
    from omni_npu_port.translate import derived as D
    fx = Path(__file__).parent / "fixtures" / "derived"
    ix = D.DerivedIndex(open_source(fx / "vllm", "vllm"), open_source(fx / "ascend", "vllm_ascend"))
    src = (fx / "gpu_fires.py").read_text()
    with recorded_probes() as probes: assert D.derived_check(src, ix)      # findings: nothing recorded
    assert probes == []
    for fault in (RecursionError, MemoryError):
        def short(*a, **k): raise fault
        monkeypatch.setattr(D.ast, "parse", short)
        with recorded_probes() as probes: assert D.derived_check(src, ix) == []
        assert [p[0] for p in probes] == ["fault"]
        monkeypatch.undo()
        k = _kept(tmp_path)
        t = translate_source(GPU.encode(), rules, "f.py")
        k.put(GPU.encode(), rules, "f.py", True, t, probes)
        assert k.written == 0
        k.put(GPU.encode(), rules, "f.py", True, t, [])                   # the same translation, no fault: kept
        assert k.written == 1


def test_a_translate_run_in_the_suite_keeps_its_translations_in_the_runs_folder_never_the_users(tmp_path, tree,
                                                                                                monkeypatch):
    ("Must not: under the suite's setting (conftest's `run_caches`), a translate run leaves the user's cache "
     "(~/.cache/omni-npu-port, here under a HOME of the test) untouched and keeps its translations in the run's "
     "temp folder; fires: without the setting, the same run keeps them in the user's cache.")
    import tempfile
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    run = Path(os.environ[kmod.TCACHE_ENV])
    assert Path(tempfile.gettempdir()).resolve() in run.resolve().parents, run
    args = ["translate", str(tree), "--check", "-q", "--target", T18, "--output-format", "json"]
    kept = lambda root: {p.name for p in root.glob(f"{kmod.code_fingerprint()}/*.json")}
    before = kept(run)
    assert main(args) == 1
    assert kept(run) - before and not home.exists()
    monkeypatch.delenv(kmod.TCACHE_ENV)
    assert main(args) == 1
    users = kept(home / ".cache" / "omni-npu-port" / "translations")
    assert users and users <= kept(run)        # the same entries (one may have been in the run's folder already)


def test_a_new_fingerprint_prunes_only_this_stores_older_folders_the_newest_two_kept(tmp_path):
    ("Fires: the oldest fingerprint folder holding only this store's entries goes; must not: a folder holding a file "
     "of another name, a folder under a name not a fingerprint's, and the two newest fingerprints stay, whole.")
    from omni_npu_port.core.io import claim_cache
    root = claim_cache(tmp_path / "kept", "translations")
    entry = "a" * 64 + ".json"
    body = {"x": 1}

    def folder(name: str, when: int, *files: str) -> Path:
        d = root / name
        d.mkdir()
        for f in files: (d / f).write_text("{}")
        os.utime(d, (when, when))
        return d
    oldest = folder("1" * 20, 1, entry)
    theirs = folder("2" * 20, 2, entry, "notes.txt")           # a file this store never writes: not its folder
    other = folder("not-a-fingerprint", 3, entry)
    newer, newest = folder("4" * 20, 4, entry), folder("5" * 20, 5, entry)
    assert kmod.keep_entry(root / ("6" * 20), "b" * 64, FILE_FORMAT, body)
    assert not oldest.exists()
    assert (theirs / "notes.txt").is_file() and (theirs / entry).is_file() and (other / entry).is_file()
    assert (newer / entry).is_file() and (newest / entry).is_file()
