"""User errors of the ``rad`` command line: one line on stderr naming what is wrong, exit
status 2, never a traceback (unreadable ``--config``, unusable ``--output-dir`` checked
before training, the install that provides a missing module, ``rad demo --b`` out of range)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rad.cli import main


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *, usage: bool = False) -> str:
    """Run ``rad argv`` in-process; check it exits 2 with one line on stderr (after
    argparse's usage when ``usage``) and no traceback; return that line."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    if usage:
        assert lines[0].startswith("usage:"), err
        lines = lines[-1:]
    assert len(lines) == 1 and lines[0].startswith(f"rad {argv[0]}"), err
    return lines[0]


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("missing.json", None, "No such file"),
        ("folder", "dir", "Is a directory"),
        ("bad.json", "not json", "not valid JSON"),
        ("bad.toml", "rounds = ", "not valid TOML"),
        ("list.json", "[1, 2]", "JSON object"),
    ],
)
def test_experiment_config_that_cannot_be_read(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               name: str, content: str | None, problem: str) -> None:
    path = tmp_path / name
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    err = _refused(["experiment", "--config", str(path)], capsys)
    assert str(path) in err and problem in err


def test_experiment_output_dir_is_checked_before_training(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import rad.distill.loop

    class Trained(Exception):
        pass

    def train(cfg: object) -> None:
        raise Trained

    monkeypatch.setattr(rad.distill.loop, "run_experiment", train)
    afile = tmp_path / "afile"
    afile.write_text("")
    for out in (afile / "sub", afile):
        err = _refused(["experiment", "--dataset", "digits", "--output-dir", str(out)], capsys)
        assert str(out) in err and "directory" in err
    # a missing directory is made before training starts
    with pytest.raises(Trained):
        main(["experiment", "--dataset", "digits", "--output-dir", str(tmp_path / "new" / "run")])
    assert (tmp_path / "new" / "run").is_dir()


@pytest.mark.parametrize(
    ("argv", "exc", "hint"),
    [
        (["experiment"], ModuleNotFoundError("No module named 'jax'", name="jax"), "pip install jax"),
        (["experiment"], ModuleNotFoundError("No module named 'torch'", name="torch"), "pip install torch"),
        (["demo", "--n", "10"], ModuleNotFoundError("No module named 'numba'", name="numba"),
         "robust-active-distillation[numba]"),
        (["demo", "--n", "10"], ModuleNotFoundError("No module named 'numba.cuda'", name="numba.cuda"),
         "robust-active-distillation[cuda]"),
    ],
)
def test_missing_module_names_the_extra_that_provides_it(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        argv: list[str], exc: ImportError, hint: str) -> None:
    import rad
    import rad.distill.cli

    def missing(*args: object, **kwargs: object) -> None:
        raise exc

    monkeypatch.setattr(rad.distill.cli, "run_from_args", missing)
    monkeypatch.setattr(rad, "solve", missing)
    err = _refused(argv, capsys)
    assert hint in err and str(exc) in err
    assert "[test]" not in err and "[tf]" not in err


def test_backend_install_message_is_shown_unchanged(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import rad._backends

    message = ("the 'cuda' backend is not available (no CUDA GPU); install the [cuda] extra "
               "(pip install 'robust-active-distillation[cuda]', i.e. numba-cuda)")

    def unavailable(name: str) -> None:
        raise ImportError(message)

    monkeypatch.setattr(rad._backends, "get_backend", unavailable)
    assert _refused(["demo", "--n", "10"], capsys) == f"rad demo: error: {message}"


@pytest.mark.skipif(importlib.util.find_spec("jax") is not None, reason="JAX is installed")
def test_experiment_on_jax_without_jax() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run(
        [sys.executable, "-m", "rad.cli", "experiment", "--keras-backend", "jax", "--dataset", "digits"],
        capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "pip install jax" in proc.stderr and "[tf]" not in proc.stderr


@pytest.mark.parametrize(
    ("b", "usage", "message"),
    [("1001", False, "b (the budget) must be in [1, n=1000], got 1001"),
     ("0", True, "argument --b: must be >= 1, got '0'")],
)
def test_demo_budget_out_of_range(capsys: pytest.CaptureFixture[str], b: str, usage: bool,
                                  message: str) -> None:
    assert _refused(["demo", "--n", "1000", "--b", b], capsys, usage=usage) == f"rad demo: error: {message}"
    # without --b the budget is min(1000, n), as before
    assert main(["demo", "--n", "100"]) == 0
    assert "budget b=100" in capsys.readouterr().out


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="needs Numba")
def test_demo_reports_numba_compilation_apart_from_the_solve(tmp_path: Path) -> None:
    """On a cold cache the Numba backend compiles for seconds at its first call, which
    ``rad demo`` reported as its solve time; a warm-up on 2^20 points now takes it, and
    says so."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "rad.cli", "demo", "--backend", "numba", "--n", "2e6"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    compiled = [line for line in lines if "compiled the numba kernels" in line]
    assert len(compiled) == 1, out.stdout
    solve = float(next(line for line in lines if "solve time" in line).split("=")[1].split()[0])
    assert solve < 0.1 * float(compiled[0].split(" in ")[1].split()[0]), out.stdout
