"""The command line's files: outputs checked before anything is written, inputs never
overwritten, modes kept, symlinks followed, Graphviz's failures said, Ctrl-C clean."""

import os
import signal
import stat
import subprocess
import sys
import time

import pytest
from helpers import InterruptedInDestructor
from test_cli import RULES, assert_bad_input, run

import ngrules as ng


@pytest.fixture
def files(tmp_path):
    x = ng.placeholder({"A": 3}, name="x")
    ng.save_graph(tmp_path / "g.json", [ng.tanh(x * 1.0 + 0.0)])
    (tmp_path / "s.rules").write_text(RULES)
    return tmp_path


def _listing(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def _apply(files, *extra):
    return run("apply", "g.json", "--rules", "s.rules", *extra, cwd=files)


# -- items 5, 6, 17, 18, 19: outputs checked before anything is written -------------------------
@pytest.mark.parametrize(
    "args, fragment",
    [
        (("-o", "d.json"), "d.json: is a folder, not a file"),  # item 5
        (("-o", ""), "an output path is empty"),  # item 17
        (("-o", "/"), "/: is a folder, not a file"),  # item 17
        (("-o", "g.npz"), "writing g.npz would overwrite the input g.npz"),  # item 6
        (("-o", "g.json"), "writing g.json would overwrite the input g.json"),  # item 6
        (("-o", "s.rules"), "writing s.rules would overwrite the input s.rules"),
        (("-o", "o.json", "--picture", "o.json"), "o.json is given for two outputs"),  # item 18
        (("-o", "o.json", "--picture", "o.npz"), "o.npz is given for two outputs"),
        (("-o", "o.json", "--picture", "g.npz"), "would overwrite the input g.npz"),
        (("-o", "o.json", "--picture", "nope/o.dot"), "nope/o.dot: folder "),  # item 19
    ],
)
def test_bad_outputs_exit_2_and_write_nothing(files, args, fragment):
    (files / "d.json").mkdir()
    (files / "d.npz").write_bytes(b"the old arrays of d")
    before = _listing(files)
    proc = _apply(files, *args)
    assert_bad_input(proc, fragment)
    assert _listing(files) == before
    assert ng.load_graph(files / "g.json")  # the input still loads


def test_a_graph_with_a_lone_surrogate_writes_nothing(files):
    text = (files / "g.json").read_text().replace('"name": "A"', '"name": "A\\udc80"', 1)
    (files / "g.json").write_text(text)
    proc = _apply(files, "-o", "o.json", "--picture", "o.dot")
    assert_bad_input(proc, "lone surrogate")
    assert not (files / "o.json").exists() and not (files / "o.dot").exists()


# -- item 20: modes kept ---------------------------------------------------------------------------
@pytest.mark.parametrize("mode", [0o600, 0o755])
def test_apply_over_an_existing_output_keeps_its_mode(files, mode):
    for name in ("o.json", "o.npz"):
        (files / name).write_text("old")
        (files / name).chmod(mode)
    assert _apply(files, "-o", "o.json").returncode == 0
    assert {stat.S_IMODE((files / n).stat().st_mode) for n in ("o.json", "o.npz")} == {mode}


@pytest.mark.parametrize("mode", [0o600, 0o755])
def test_fmt_keeps_the_mode_of_the_file_it_replaces(files, mode):
    path = files / "u.rules"
    path.write_text("rule   a :  x*1=>x\n")
    path.chmod(mode)
    assert run("fmt", "u.rules", cwd=files).returncode == 0
    assert path.read_text() != "rule   a :  x*1=>x\n"
    assert stat.S_IMODE(path.stat().st_mode) == mode


# -- items 33, 34: fmt on odd files ----------------------------------------------------------------
def test_fmt_on_a_file_that_is_not_utf8_is_a_located_error(files):
    (files / "bad.rules").write_bytes(b"rule a: x * 1 => x  # caf\xe9\n")
    proc = run("fmt", "bad.rules", cwd=files)
    assert_bad_input(proc, "bad.rules:1:", "not UTF-8")


def test_fmt_on_a_symlink_formats_its_target_and_keeps_the_link(files):
    real = files / "real.rules"
    real.write_text("rule   a :  x*1=>x\n")
    (files / "link.rules").symlink_to("real.rules")
    assert run("fmt", "link.rules", cwd=files).returncode == 0
    assert (files / "link.rules").is_symlink()
    assert run("fmt", "real.rules", "--check", cwd=files).returncode == 0


# -- item 35: Graphviz that fails or times out -----------------------------------------------------
def _fake_dot(folder, body):
    bindir = folder / "bin"
    bindir.mkdir()
    script = bindir / "dot"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}


def _apply_env(files, env, *extra):
    exe = os.path.join(os.path.dirname(sys.executable), "ngrules")
    args = [exe, "apply", "g.json", "--rules", "s.rules", "-o", "o.json", "--picture", "o.dot"]
    return subprocess.run(
        [*args, *extra], cwd=files, env=env, capture_output=True, text=True, timeout=120
    )


def test_graphviz_timing_out_is_said_and_the_dot_file_kept(files):
    env = _fake_dot(files, "exec sleep 30")
    proc = _apply_env(files, env, "--picture-timeout", "0.5")
    assert proc.returncode == 0, proc.stderr
    assert "picture: o.dot (Graphviz timed out after 0.5 s; the DOT file is kept)" in proc.stdout
    assert "install" not in proc.stdout
    assert (files / "o.dot").read_text().startswith("digraph ngrules {")
    assert not (files / "o.svg").exists()


def test_graphviz_failing_is_said(files):
    env = _fake_dot(files, "echo 'Error: syntax error in line 1' >&2; exit 1")
    proc = _apply_env(files, env)
    assert "picture: o.dot (Graphviz failed: Error: syntax error in line 1)" in proc.stdout
    assert (files / "o.dot").exists() and not (files / "o.svg").exists()


def test_a_bad_picture_timeout_is_a_usage_error(files):
    assert_bad_input(_apply(files, "-o", "o.json", "--picture-timeout", "-1"), "seconds")


# -- item 21: Ctrl-C -------------------------------------------------------------------------------
_SLOW = 30_000  # nodes: loading, rewriting and saving take a few seconds


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    folder = tmp_path_factory.mktemp("big")
    x = ng.placeholder({"A": 2}, name="x")
    y = x
    for _ in range(_SLOW):
        y = ng.tanh(y)
    ng.save_graph(folder / "g.json", [y])
    (folder / "s.rules").write_text(RULES)
    return folder


def _interrupt(folder, when, signum=signal.SIGINT) -> subprocess.CompletedProcess:
    """Run `apply` on the big graph, wait until `when(folder)` holds, then send `signum`."""
    for leftover in folder.glob("*o.*"):
        leftover.unlink()
    code = "import sys; from ngrules.cli.main import main; print('ready', flush=True); "
    code += "sys.exit(main(sys.argv[1:]))"
    args = ["apply", "g.json", "--rules", "s.rules", "-o", "o.json", "--quiet"]  # stderr: one line
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], cwd=folder, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout.readline() == "ready\n"
    deadline = time.monotonic() + 60
    while not when(folder) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _writing(folder) -> bool:
    return any(p.name.startswith(".o.") for p in folder.iterdir())


def test_a_ctrl_c_lost_in_a_destructor_still_stops_the_command(files, monkeypatch, capsys):
    from ngrules.cli.main import main
    from ngrules.engine import driver

    real = driver.rewrite

    def rewrite(*args, **kwargs):
        InterruptedInDestructor()
        return real(*args, **kwargs)

    monkeypatch.setattr(driver, "rewrite", rewrite)
    monkeypatch.chdir(files)
    before = _listing(files)
    assert main(["apply", "g.json", "--rules", "s.rules", "-o", "o.json"]) == 130
    assert capsys.readouterr().err == "ngrules: interrupted\n"
    assert _listing(files) == before  # no output was moved into place


def test_ctrl_c_while_working_exits_130_with_one_line_and_no_files(big):
    proc = _interrupt(big, lambda folder: time.sleep(0.3) or True)
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert proc.stderr == "ngrules: interrupted\n"
    assert sorted(p.name for p in big.iterdir()) == ["g.json", "g.npz", "s.rules"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_ctrl_c_while_writing_leaves_no_partial_file(big, signum):
    """SIGTERM is taken as Ctrl-C: it once left the hidden `.o.json.*.tmp` files behind."""
    inputs = ["g.json", "g.npz", "s.rules"]
    for _ in range(5):  # on a loaded machine the write may finish before the signal lands
        proc = _interrupt(big, _writing, signum)
        names = sorted(p.name for p in big.iterdir())
        # interrupted before its moves: nothing; during them (signals held) or after: the pair
        assert names in (inputs, sorted([*inputs, "o.json", "o.npz"])), names
        if "o.json" in names:
            ng.load_graph(big / "o.json")
        if proc.returncode != 0:
            break
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert proc.stderr == "ngrules: interrupted\n"


# -- issue 25: no command follows a symbolic link out of the folder it was given ------------------
def test_check_of_a_folder_never_reads_a_link_out_of_it(tmp_path):
    """`rules/z.rules -> /proc/self/environ` once had CI's secrets quoted in the error."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "a.rules").write_text("pass p\nrule r: x * 1 => x\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOKEN=hunter2\n")
    (rules / "y.rules").symlink_to(secret)
    (rules / "z.rules").symlink_to("/proc/self/environ")
    env = {**os.environ, "TOKEN": "hunter2"}
    exe = os.path.join(os.path.dirname(sys.executable), "ngrules")
    for args in (["check", "rules/"], ["check", "rules/z.rules"], ["verify", "rules"],
                 ["fmt", "rules/y.rules"]):
        proc = subprocess.run([exe, *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)
        assert_bad_input(proc, "a symbolic link out of", "not followed")
        assert "hunter2" not in proc.stdout + proc.stderr


def test_fmt_of_a_folder_never_writes_through_a_link_out_of_it(tmp_path):
    inside, outside = tmp_path / "d", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    messy = "rule   q :x*1=>x\n"
    (outside / "o.rules").write_text(messy)
    (inside / "o.rules").symlink_to(outside / "o.rules")
    (inside / "m.rules").write_text(messy)
    (inside / "near.rules").symlink_to("m.rules")  # a link that stays inside is followed
    assert_bad_input(run("fmt", "d", cwd=tmp_path), "d/o.rules: a symbolic link out of d")
    assert (outside / "o.rules").read_text() == messy  # nothing was written anywhere
    assert (inside / "m.rules").read_text() == messy
    (inside / "o.rules").unlink()
    assert run("fmt", "d", cwd=tmp_path).returncode == 0
    assert (inside / "m.rules").read_text() == "rule q: x * 1 => x\n"
    assert (inside / "near.rules").is_symlink()


def test_a_rules_path_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "f.rules")
    assert_bad_input(run("check", "f.rules", cwd=tmp_path), "f.rules: not a regular file")
