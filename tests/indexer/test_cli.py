"""The command line as an operator runs it: exit codes, --check, a second indexer, SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from catalog.config import Config
from indexer.report import Reporter
from indexer.session import Session
from tests.indexer.helpers import read_index, spec_yaml
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "indexer", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _events(stderr: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _alive(pids: set[int]) -> bool:
    alive = False
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        alive = alive or state != "Z"
    return alive


def _lexical(tmp_path: Path) -> tuple[str, str]:
    """``--config`` of a config with the semantic side off, for builds of thousands of tools
    whose vectors (a minute and more here) are not what the test is about.
    """
    config = tmp_path / "lexical.toml"
    config.write_text("[search]\nsemantic = false\n")
    return ("--config", str(config))


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    d = tmp_path / "specs"
    d.mkdir()
    (d / "pets.yaml").write_text(spec_yaml("Pets", ["listPets", "getPet"]))
    return d


def test_build_logs_json_lines_and_a_summary(specs: Path, tmp_path: Path) -> None:
    proc = _run("--specs", specs, "--index", tmp_path / "index")
    assert proc.returncode == 0, proc.stderr
    events = _events(proc.stderr)
    summary = next(e for e in events if e["event"] == "summary")
    assert summary["documents"] == 1
    assert summary["operations"] == 2
    assert summary["errors"] == 0
    assert "elapsed_s" in summary
    assert all(line.startswith("{") for line in proc.stderr.splitlines() if line.strip())
    assert len(read_index(tmp_path / "index").tools) == 2


def test_check_exit_codes(specs: Path, tmp_path: Path) -> None:
    ok = _run("--check", "--specs", specs)
    assert ok.returncode == 0, ok.stderr
    assert not (specs / "index").exists()

    (specs / "broken.yaml").write_text("openapi: 3.0.3\npaths: [\n")
    bad = _run("--check", "--specs", specs)
    assert bad.returncode == 1
    problems = [e for e in _events(bad.stderr) if e["event"] == "spec_problem"]
    assert problems[0]["file"] == "broken.yaml"
    assert problems[0]["reason"]
    check = next(e for e in _events(bad.stderr) if e["event"] == "check")
    assert check["broken"] == ["broken.yaml"]
    (specs / "broken.yaml").unlink()

    # A document is broken even when another $refs it: only a file that is no OpenAPI
    # document at all is a fragment, whose problem is a warning.
    common = spec_yaml("Common", ["listWidgets"], response_ref="#/components/schemas/Missing")
    (specs / "common.yaml").write_text(common + "components: {schemas: {Good: {type: object}}}\n")
    good = "common.yaml#/components/schemas/Good"
    (specs / "api.yaml").write_text(spec_yaml("Api", ["getThing"], response_ref=good))
    referenced = _run("--check", "--specs", specs)
    assert referenced.returncode == 1
    check = next(e for e in _events(referenced.stderr) if e["event"] == "check")
    assert check["broken"] == ["common.yaml"]
    (specs / "common.yaml").unlink()
    (specs / "api.yaml").unlink()

    config = tmp_path / "sezzlee.toml"
    config.write_text('[specs."pets.yaml"]\nnmespace = "x"\n')
    invalid = _run("--check", "--specs", specs, "--config", config)
    assert invalid.returncode == 1
    assert "nmespace" in invalid.stderr
    config.write_text('[specs."pets.yaml"]\nnamespace = ""\n')
    assert _run("--check", "--specs", specs, "--config", config).returncode == 0


def test_second_indexer_exits_with_one_clear_line(specs: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    with open(tmp_path / "log", "w") as stream:
        holder = Session(specs, index, Config(), Reporter(stream, json_lines=True), workers=1)
        try:
            proc = _run("--specs", specs, "--index", index)
        finally:
            holder.close()
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "another indexer is already writing to" in lines[0]
    assert "Traceback" not in proc.stderr


def test_sigkill_mid_build_keeps_the_last_commit(specs: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    assert _run("--specs", specs, "--index", index).returncode == 0
    before = read_index(index)
    assert before.meta is not None
    for i in range(160):
        ops = [f"op{i}x{j}" for j in range(25)]
        (specs / f"bulk{i:03d}.yaml").write_text(spec_yaml(f"Bulk{i}", ops))
    proc = subprocess.Popen(
        [sys.executable, "-m", "indexer", "--specs", str(specs), "--index", str(index)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    killed_mid_write = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        event = json.loads(line)
        if event["event"] == "progress" and event["stage"] == "writing":
            workers = _children(proc.pid)
            os.kill(proc.pid, signal.SIGKILL)  # documents added, commit not yet reached
            killed_mid_write = True
            break
    proc.wait(timeout=30)
    proc.stderr.close()
    assert killed_mid_write, "the build ended before it could be killed"
    assert proc.returncode == -signal.SIGKILL
    assert workers, "a 160-document build converts in a process pool"
    eventually(lambda: not _alive(workers), "the conversion workers to end", timeout=10)

    after_kill = read_index(index)
    assert after_kill.meta == before.meta
    assert after_kill.tools == before.tools

    # Lexical only: the 4,000 new tools' vectors would take the build past the timeout.
    rerun = _run("--specs", specs, "--index", index, *_lexical(tmp_path))
    assert rerun.returncode == 0, rerun.stderr
    recovered = read_index(index)
    assert recovered.meta is not None
    assert recovered.meta.commit == before.meta.commit + 1
    assert len(recovered.tools) == 2 + 160 * 25
    assert recovered.names_in_order() == sorted(recovered.tools)


def test_unwritable_index_exits_3_and_missing_specs_exit_1(specs: Path, tmp_path: Path) -> None:
    not_a_dir = tmp_path / "index-file"
    not_a_dir.write_text("not an index")
    proc = _run("--specs", specs, "--index", not_a_dir)
    assert proc.returncode == 3
    assert "cannot create" in proc.stderr
    missing = _run("--specs", tmp_path / "nope", "--index", tmp_path / "index")
    assert missing.returncode == 1
    assert "not a directory" in missing.stderr
    assert not (tmp_path / "index").exists()
    no_index = _run("--specs", specs)  # a usage error, exited as argparse's own
    assert no_index.returncode == 2
    assert "--index is required unless --check" in no_index.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_watch_stops_cleanly_on_sigterm_and_sigint(
    specs: Path, tmp_path: Path, signum: signal.Signals
) -> None:
    index = str(tmp_path / "i")
    proc = subprocess.Popen(
        [sys.executable, "-m", "indexer", "--specs", str(specs), "--index", index, "--watch"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as a background job
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if '"event":"watching"' in line:
            break
    proc.send_signal(signum)
    assert proc.wait(timeout=10) == 0
    proc.stderr.close()
    # The writer lock was released: another indexer can run at once.
    assert _run("--specs", specs, "--index", tmp_path / "i").returncode == 0


@pytest.mark.parametrize(
    ("signum", "mode"), [(signal.SIGINT, ()), (signal.SIGTERM, ("--watch",))], ids=str
)
def test_an_interrupted_build_says_so_and_keeps_the_last_commit(
    specs: Path, tmp_path: Path, signum: signal.Signals, mode: tuple[str, ...]
) -> None:
    index = tmp_path / "index"
    assert _run("--specs", specs, "--index", index).returncode == 0
    before = read_index(index)
    for i in range(160):
        ops = [f"op{i}x{j}" for j in range(25)]
        (specs / f"bulk{i:03d}.yaml").write_text(spec_yaml(f"Bulk{i}", ops))
    proc = subprocess.Popen(
        [sys.executable, "-m", "indexer", "--specs", str(specs), "--index", str(index), *mode],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as under a terminal
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if '"event":"progress"' in line:  # a build of 160 documents under way
            if signum == signal.SIGINT:
                os.killpg(proc.pid, signum)  # a terminal's Ctrl-C reaches the whole group
            else:
                proc.send_signal(signum)
            break
    rest = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=30) == 128 + signum  # 130 for SIGINT, 143 for SIGTERM
    events = [e for e in _events(rest) if e["event"] != "progress"]
    assert [(e["event"], e["signal"]) for e in events] == [("interrupted", signum.name)]
    assert all(line.startswith("{") for line in rest.splitlines())  # no traceback
    after = read_index(index)
    assert after.meta == before.meta
    assert after.tools == before.tools
    # The lock was released (lexical only: 4,000 new tools' vectors would time the build out).
    assert _run("--specs", specs, "--index", index, *_lexical(tmp_path)).returncode == 0


def _bulk_specs(specs: Path, documents: int) -> None:
    for i in range(documents):
        ops = [f"op{i}x{j}" for j in range(25)]
        (specs / f"bulk{i:03d}.yaml").write_text(spec_yaml(f"Bulk{i}", ops))


def _converting(specs: Path, index: Path) -> subprocess.Popen[str]:
    """An indexer in its own process group, returned once its pool is converting."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "indexer", "--specs", str(specs), "--index", str(index)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if '"stage":"converting"' in line:
            return proc
    raise AssertionError(f"no conversion under way: {proc.stderr.read()}")


def _pool_workers(pid: int) -> set[int]:
    # Not the resource tracker, the spawn context's other child.
    return {c for c in _children(pid) if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()}


def test_a_sigterm_to_the_process_group_ends_a_build_cleanly(tmp_path: Path) -> None:
    # systemd's KillMode=control-group: the pool's workers die of the indexer's SIGTERM,
    # and the pool fails their pending work while the indexer gives the batch up. The
    # two raced, and the pool's thread died with a traceback (about every other build).
    # A worker killed while it writes its result can also leave the pool's thread
    # waiting forever for the rest: the exit must not join it (__main__._leave).
    specs = tmp_path / "specs"
    specs.mkdir()
    _bulk_specs(specs, 160)
    for attempt in range(4):
        proc = _converting(specs, tmp_path / f"index{attempt}")
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.stderr is not None
        rest = proc.stderr.read()
        proc.stderr.close()
        assert proc.wait(timeout=30) == 143
        assert "Traceback" not in rest
        assert all(line.startswith("{") for line in rest.splitlines()), rest
        events = [e for e in _events(rest) if e["event"] != "progress"]
        assert [(e["event"], e["signal"]) for e in events] == [("interrupted", "SIGTERM")]


def test_a_pool_worker_that_dies_alone_fails_the_build(specs: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    assert _run("--specs", specs, "--index", index).returncode == 0
    before = read_index(index)
    _bulk_specs(specs, 160)
    proc = _converting(specs, index)
    workers = _pool_workers(proc.pid)
    assert workers, "a 160-document build converts in a process pool"
    os.kill(min(workers), signal.SIGKILL)  # not a signal the indexer stops for
    assert proc.stderr is not None
    rest = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=30) == 1
    assert "BrokenProcessPool: A process in the process pool was terminated abruptly" in rest
    assert "InvalidStateError" not in rest
    assert not any(e["event"] == "interrupted" for e in _events(rest))
    eventually(lambda: not _alive(workers), "the conversion workers to end", timeout=10)
    after = read_index(index)
    assert after.meta == before.meta
    assert after.tools == before.tools


@pytest.mark.parametrize("layout", ["same", "specs inside the index"])
def test_an_index_that_is_or_holds_the_spec_directory_is_refused(
    specs: Path, tmp_path: Path, layout: str
) -> None:
    index = specs if layout == "same" else tmp_path / "index"
    if layout != "same":
        index.mkdir()
        specs = specs.rename(index / "specs")
    for mode in ((), ("--watch",), ("--check",)):
        proc = _run("--specs", specs, "--index", index, *mode)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.splitlines()
        assert len(lines) == 1
        assert json.loads(lines[0])["event"] == "usage"
    assert not (index / "meta.json").exists()  # nothing was written


def test_check_and_explain_skip_an_index_under_the_spec_directory(specs: Path) -> None:
    index = specs / "index"
    assert _run("--specs", specs, "--index", index).returncode == 0
    check = _run("--check", "--specs", specs, "--index", index)
    assert check.returncode == 0, check.stderr
    assert next(e for e in _events(check.stderr) if e["event"] == "check")["documents"] == 1
    explain = _run("--explain", "pets.list_pets", "--specs", specs, "--index", index)
    assert explain.returncode == 0, explain.stderr
    assert "document:    pets.yaml" in explain.stdout


def test_check_warns_of_a_spec_section_that_matches_no_document(
    specs: Path, tmp_path: Path
) -> None:
    config = tmp_path / "sezzlee.toml"
    config.write_text('[specs."pets.yml"]\nnamespace = "p"\n')  # the file is pets.yaml
    proc = _run("--check", "--specs", specs, "--config", config)
    assert proc.returncode == 0, proc.stderr  # a warning: the file may be yet to come
    warned = [e for e in _events(proc.stderr) if e["event"] == "config_unmatched"]
    assert [(e["level"], e["message"]) for e in warned] == [
        ("warning", f"{config}: specs.'pets.yml': matches no spec file")
    ]


@pytest.mark.parametrize(
    ("section", "key", "name"),
    [
        ('[specs."pets.yaml"]\nca_bundle = "ca.pem"\n', "ca_bundle", "ca.pem"),
        ('[specs."pets.yaml"]\nclient_cert = "client.pem"\n', "client_cert", "client.pem"),
        ('[specs."pets.yaml".jwt]\njwks_file = "keys.json"\n', "jwt.jwks_file", "keys.json"),
    ],
    ids=["ca_bundle", "client_cert", "jwks_file"],
)
def test_check_fails_on_a_file_the_config_names_that_is_missing(
    specs: Path, tmp_path: Path, section: str, key: str, name: str
) -> None:
    config = tmp_path / "conf" / "sezzlee.toml"
    config.parent.mkdir()
    config.write_text(section)
    missing = _run("--check", "--specs", specs, "--config", config)
    assert missing.returncode == 1  # the server refuses to start with this config
    invalid = [e for e in _events(missing.stderr) if e["event"] == "config_invalid"]
    where = config.parent / name  # next to the config file, as the server looks for it
    assert [e["message"] for e in invalid] == [
        f"{config}: specs.'pets.yaml'.{key}: {where}: no such file"
    ]
    where.write_text("")
    assert _run("--check", "--specs", specs, "--config", config).returncode == 0


def test_semantic_indexing_without_the_pinned_model_exits_2(specs: Path, tmp_path: Path) -> None:
    # The tokenizer's package shadowed by one whose tokenizer.json is another file.
    fake = tmp_path / "shadow" / "all_minilm_l6_v2"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    with zipfile.ZipFile(fake / "model.zip", "w") as bundle:
        bundle.writestr("tokenizer.json", '{"not": "the pinned tokenizer"}')
    env = {**os.environ, "PYTHONPATH": f"{fake.parent}{os.pathsep}{ROOT}"}
    index = tmp_path / "index"
    answer = subprocess.run(
        [sys.executable, "-m", "indexer", "--specs", str(specs), "--index", str(index)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert answer.returncode == 2
    fatal = [e for e in _events(answer.stderr) if e.get("event") == "fatal"]
    assert fatal
    assert "not the pinned" in str(fatal[0]["message"])
    assert not (index / "meta.json").exists()  # refused before anything was written


def test_a_build_whose_vectors_fail_exits_4_with_its_catalog_committed(
    specs: Path, tmp_path: Path
) -> None:
    # Before: the build logged vectors_failed and exited 0, as if its work were done.
    index = tmp_path / "index"
    index.mkdir()
    (index / "vectors").write_text("a file where the vectors directory goes")
    proc = _run("--specs", specs, "--index", index)
    assert proc.returncode == 4, proc.stderr
    events = _events(proc.stderr)
    assert [e["event"] for e in events if e["level"] == "error"] == ["vectors_failed", "fatal"]
    assert "the tool vectors failed" in str(events[-1]["message"])
    assert len(read_index(index).tools) == 2  # the lexical catalog is committed and served


def test_a_build_interrupted_while_its_vectors_fill_exits_130(specs: Path, tmp_path: Path) -> None:
    # Before: an interrupt after the lexical commit was taken for a watch's normal stop (0).
    for i in range(12):
        ops = [f"op{i}x{j}Things" for j in range(25)]
        (specs / f"bulk{i:02d}.yaml").write_text(spec_yaml(f"Bulk{i}", ops))
    proc = subprocess.Popen(
        [sys.executable, "-m", "indexer", "--specs", str(specs), "--index", str(tmp_path / "i")],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if '"event":"summary"' in line:  # committed; 302 tools' vectors take seconds
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=30) == 130
    events = _events(rest)
    assert [e["event"] for e in events if e["event"] != "vectors"] == ["interrupted"]
    # The fill stopped by the interrupt may report what it wrote: never a complete fill.
    assert all(e["complete"] is False for e in events if e["event"] == "vectors")
    assert all(line.startswith("{") for line in rest.splitlines())  # no traceback
