"""Tests of the ``rad verify`` command line (random instances vs the LP and the
certificate; certifying a user's own ``.npy`` instance; bad invocations) and of the
harness behind it (``rad.verify.harness``)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from rad.cli import main


def test_random_instances_pass_and_print_a_table(capsys):
    rc = main(["verify", "--instances", "14", "--max-n", "12", "--seed", "3",
               "--kinds", "uniform,ties,zeros,equal,heavy,losses"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "14/14 passed" in out
    rows = [line for line in out.splitlines() if line.rstrip().endswith(" ok")]
    assert len(rows) == 14
    for kind in ("uniform", "ties", "zeros", "equal", "heavy", "losses"):
        assert any(f" {kind} " in r for r in rows)


def test_random_mode_fails_loudly_when_the_solver_is_wrong(capsys, monkeypatch):
    import rad._solve.batch as solver

    real = solver.solve_game

    def off_by_a_lot(game):
        # Solve for half the mistakes: a valid-looking but sub-optimal answer.
        return dataclasses.replace(real(dataclasses.replace(game, m=0.5 * game.m)), m=game.m)

    monkeypatch.setattr(solver, "solve_game", off_by_a_lot)
    rc = main(["verify", "--instances", "10", "--max-n", "12", "--seed", "1", "--kinds", "uniform"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "FAIL" in out and "FAILED" in out


def test_certify_a_users_npy(tmp_path, capsys):
    gains = np.random.default_rng(0).random(200_000, dtype=np.float32)
    path = tmp_path / "gains.npy"
    np.save(path, gains)
    adv = tmp_path / "c.npy"
    rc = main(["verify", "--gains", str(path), "--m", "60000", "--b", "100", "--adversary", str(adv)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "OPTIMAL" in out and "n=200,000 float32" in out
    c = np.load(adv)
    assert c.shape == (200_000,) and np.all((c >= 0) & (c <= 1))
    assert abs((1 - c).sum() - 60_000) <= 1e-6 * 60_000


def test_certify_a_users_probabilities_reports_their_gap(tmp_path, capsys):
    gains = np.random.default_rng(1).random(5000)
    np.save(tmp_path / "g.npy", gains)
    q = np.zeros(5000)
    q[np.argsort(-gains)[:10]] = 1.0  # margin's top-b
    np.save(tmp_path / "q.npy", q)
    rc = main(["verify", "--gains", str(tmp_path / "g.npy"), "--m", "1500", "--b", "10",
               "--q", str(tmp_path / "q.npy")])
    out = capsys.readouterr().out
    assert rc == 1
    assert "NOT CERTIFIED" in out


def test_general_losses_and_w(tmp_path, capsys):
    rng = np.random.default_rng(2)
    np.save(tmp_path / "g.npy", rng.random(3000))
    np.save(tmp_path / "l.npy", rng.random(3000))
    assert main(["verify", "--gains", str(tmp_path / "g.npy"), "--m", "900", "--b", "30",
                 "--losses", str(tmp_path / "l.npy")]) == 0
    assert main(["verify", "--gains", str(tmp_path / "g.npy"), "--m", "900", "--b", "30",
                 "--w", "0.25", "--method", "search"]) == 0
    out = capsys.readouterr().out
    assert out.count("OPTIMAL") == 2 and "adversary: search" in out


def test_usage_errors(tmp_path):
    np.save(tmp_path / "g.npy", np.ones(10))
    with pytest.raises(SystemExit, match="--m"):
        main(["verify", "--gains", str(tmp_path / "g.npy")])
    with pytest.raises(SystemExit, match="cannot read"):
        main(["verify", "--gains", str(tmp_path / "missing.npy"), "--m", "1"])
    with pytest.raises(SystemExit, match="m \\(the teacher"):
        main(["verify", "--gains", str(tmp_path / "g.npy"), "--m", "11"])
    with pytest.raises(SystemExit, match="unknown --kinds"):
        main(["verify", "--kinds", "uniform,nope"])


def test_w_with_losses_is_refused_before_the_header(tmp_path, capsys):
    """--w with --losses printed the instance's header, then the usage error."""
    np.save(tmp_path / "g.npy", np.ones(10))
    np.save(tmp_path / "l.npy", np.ones(10))
    with pytest.raises(SystemExit, match="--w or --losses"):
        main(["verify", "--gains", str(tmp_path / "g.npy"), "--m", "1", "--b", "2", "--w", "0.5",
              "--losses", str(tmp_path / "l.npy")])
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("case, message", [
    ("empty", "gains is empty"),
    ("short_losses", r"losses must have shape \(10,\) like gains, got \(9,\)"),
    ("short_q", r"q must have shape \(10,\) like gains, got \(9,\)"),
    ("text", "not a NumPy .npy file"),
])
def test_bad_files_are_refused_before_the_header(case, message, tmp_path, capsys):
    """An empty pool, a --losses or --q of another shape, a file that is not .npy: a
    usage error naming it, and nothing on stdout (the header came first)."""
    np.save(tmp_path / "g.npy", np.zeros(0) if case == "empty" else np.ones(10))
    np.save(tmp_path / "short.npy", np.ones(9))
    (tmp_path / "text.npy").write_text("hello")
    argv = ["verify", "--gains", str(tmp_path / ("text.npy" if case == "text" else "g.npy")), "--m", "0", "--b", "0"]
    if case == "short_losses":
        argv += ["--losses", str(tmp_path / "short.npy")]
    if case == "short_q":
        argv += ["--q", str(tmp_path / "short.npy")]
    with pytest.raises(SystemExit, match=message):
        main(argv)
    assert capsys.readouterr().out == ""


def test_demo_refuses_a_bad_thread_count_before_any_output(capsys, monkeypatch):
    monkeypatch.setenv("RAD_NUM_THREADS", "abc")
    assert main(["demo", "--n", "1000"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "RAD_NUM_THREADS" in captured.err


def test_console_entry_point_runs():
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from rad.cli import main; sys.exit(main())",
         "verify", "--instances", "3", "--max-n", "6", "--kinds", "uniform"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3/3 passed" in proc.stdout


# --------------------------------------------------------------------------------------
# Bad invocations: one line on stderr naming the flag, exit status 2, before any work.


def _usage_error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("rad verify: error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--m", "nan"], "--m"),
        (["--m", "inf"], "--m"),
        (["--m", "-1"], "--m"),
        (["--m", "three"], "--m"),
        (["--b", "-3"], "--b"),
        (["--b", "1.5"], "--b"),
        (["--w", "nan"], "--w"),
        (["--threads", "0"], "--threads"),
        (["--seed", "-1"], "--seed"),
        (["--instances", "0"], "--instances"),
        (["--max-n", "0"], "--max-n"),
        (["--rtol", "-1e-9"], "--rtol"),
        (["--method", "lp"], "--method"),
        (["--backend", "fortran"], "--backend"),
        (["--adversary", "/nonexistent/dir/x.npy"], "--adversary"),
        (["--gains", "/nonexistent/g.npy", "--m", "1"], "--gains"),
        (["--q", "/nonexistent/q.npy"], "--q"),
        (["--losses", "/nonexistent/l.npy"], "--losses"),
        (["--kinds", "uniform,nope"], "--kinds"),
        (["--m", "3"], "--m"),  # a flag of the other mode
        (["--adversary", "x.npy"], "--adversary"),
    ],
)
def test_bad_invocations_are_one_line_exit_2(argv, flag, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _usage_error(["verify", *argv], capsys)
    assert flag in line
    assert not (tmp_path / "x.npy").exists()


def test_file_mode_usage_errors_name_the_problem(tmp_path, capsys):
    g = tmp_path / "g.npy"
    np.save(g, np.random.default_rng(0).random(10))
    np.savez(tmp_path / "g.npz", g=np.ones(3))
    np.save(tmp_path / "g2.npy", np.ones((2, 5)))
    np.save(tmp_path / "q.npy", np.ones(4))
    (tmp_path / "junk.npy").write_text("not an array")
    cases = [
        (["--gains", str(g)], "--m"),
        (["--gains", str(g), "--m", "11"], "m (the teacher"),
        (["--gains", str(g), "--m", "1", "--b", "11"], "b (the budget)"),
        (["--gains", str(g), "--m", "1", "--seed", "3"], "--seed"),
        (["--gains", str(g), "--m", "1", "--kinds", "uniform"], "--kinds"),
        (["--gains", str(g), "--m", "1", "--q", str(tmp_path / "q.npy")], "q must have shape"),
        (["--gains", str(tmp_path / "g.npz"), "--m", "1"], ".npz"),
        (["--gains", str(tmp_path / "g2.npy"), "--m", "1"], "one-dimensional"),
        (["--gains", str(tmp_path / "junk.npy"), "--m", "1"], "cannot read --gains"),
        (["--gains", str(tmp_path), "--m", "1"], "directory"),
    ]
    for argv, words in cases:
        assert words in _usage_error(["verify", *argv], capsys), argv


def test_bad_adversary_path_fails_before_any_computation(tmp_path):
    np.save(tmp_path / "g.npy", np.random.default_rng(0).random(100))
    for argv in (
        ["verify", "--adversary", "/nonexistent/x.npy"],
        ["verify", "--gains", str(tmp_path / "g.npy"), "--m", "30", "--adversary", "/nonexistent/x.npy"],
    ):
        proc = subprocess.run(
            [sys.executable, "-c", "import sys; from rad.cli import main; sys.exit(main())", *argv],
            capture_output=True, text=True, timeout=120,
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stdout == ""  # no table, no header: nothing was computed
        err = proc.stderr.strip().splitlines()
        assert len(err) == 1 and "--adversary" in err[0] and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------------------
# The harness behind the random mode.


def test_harness_returns_rows_and_a_verdict():
    from rad.verify import InstanceCheck, check_random_instances
    from rad.verify.harness import INSTANCE_KINDS

    seen = []
    report = check_random_instances(9, kinds=INSTANCE_KINDS[:3], seed=5, max_n=8, on_check=seen.append)
    assert report.passed and report.failures == 0 and report.with_lp
    assert len(report.checks) == 9 and list(report.checks) == seen
    assert all(isinstance(c, InstanceCheck) and c.passed for c in report.checks)
    assert [c.instance.kind for c in report.checks] == list(INSTANCE_KINDS[:3]) * 3
    again = check_random_instances(9, kinds=INSTANCE_KINDS[:3], seed=5, max_n=8)
    assert [(c.lower, c.upper) for c in again.checks] == [(c.lower, c.upper) for c in report.checks]
    with pytest.raises(ValueError, match="unknown kinds"):
        check_random_instances(1, kinds=["nope"])
    with pytest.raises(ValueError, match="instances"):
        check_random_instances(0)
