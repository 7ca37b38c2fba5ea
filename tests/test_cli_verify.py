"""Tests of the ``rad verify`` command line (random instances vs the LP and the
certificate; certifying a user's own ``.npy`` instance)."""

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


def test_console_entry_point_runs():
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from rad.cli import main; sys.exit(main())",
         "verify", "--instances", "3", "--max-n", "6", "--kinds", "uniform"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3/3 passed" in proc.stdout
