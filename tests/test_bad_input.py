"""Bad and edge inputs get a clear answer, never a crash (issue 14).

The corpus (:mod:`bad_input_corpus`: gains that are NaN, infinite, negative, subnormal,
near the float64 maximum, of odd dtypes and shapes; every odd ``m``, ``b``, ``w``,
``losses``, ``rng``, ``threads``, ``backend``; ``rad.depround`` vectors; ``rad.dask``;
bad ``rad`` command lines) runs in a subprocess: a crash of the interpreter is reported as
the failure of the entry that was running, and the rest of the corpus still runs.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time

import pytest

from bad_input_corpus import entries

HERE = os.path.dirname(os.path.abspath(__file__))
#: One entry may take this long before it counts as a hang.
ENTRY_TIMEOUT = 120.0


def _run_corpus(ids: list[int]) -> dict[int, dict]:
    """Outcome of every entry; the runner is restarted after a crash or hang."""
    results: dict[int, dict] = {}
    pending = list(ids)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([HERE, env.get("PYTHONPATH", "")])
    env.setdefault("PYTHONWARNINGS", "ignore")
    while pending:
        proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "bad_input_corpus.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(f"{i}\n" for i in pending))
        proc.stdin.close()
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        running = None
        deadline = time.monotonic() + ENTRY_TIMEOUT + 60  # the first entry also imports rad
        while True:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                proc.kill()
                proc.wait()
                results[running if running is not None else pending[0]] = {"ok": False, "why": "hang"}
                break
            line = proc.stdout.readline()
            if not line:  # the runner died: the running entry crashed it
                proc.wait()
                if running is not None:
                    results[running] = {"ok": False, "why": f"crashed the interpreter (status {proc.returncode})"}
                break
            msg = json.loads(line)
            if "start" in msg:
                running = msg["start"]
                deadline = time.monotonic() + ENTRY_TIMEOUT
            else:
                results[msg["id"]] = msg
                running = None
        sel.close()
        proc.stdout.close()
        pending = [i for i in pending if i not in results]
    return results


def test_every_bad_input_gets_a_clear_answer() -> None:
    corpus = entries()
    assert len(corpus) >= 1400
    results = _run_corpus([e["id"] for e in corpus])
    bad = [(corpus[i], r) for i, r in sorted(results.items()) if not r.get("ok")]
    report = "\n".join(f"{e.get('py') or ' '.join(['rad', *e['cli']])}: {r.get('why')}" for e, r in bad[:40])
    assert not bad, f"{len(bad)} of {len(corpus)} inputs without a clear answer:\n{report}"


@pytest.mark.parametrize(
    "argv",
    [["demo", "--n", "nan"], ["demo", "--n", "2.5"], ["demo", "--b", "-3"], ["demo", "--threads", "0"],
     ["demo", "--seed", "-1"], ["demo", "--n", "1e20"]],
)
def test_cli_bad_invocation_exit_status(argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "rad.cli", *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("rad demo: error:")


def test_rad_backend_typo_is_one_line() -> None:
    env = dict(os.environ, RAD_BACKEND="x")
    proc = subprocess.run([sys.executable, "-m", "rad.cli", "info"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "RAD_BACKEND" in proc.stderr


def test_unreadable_tensors_name_the_argument() -> None:
    """A PyTorch tensor that requires grad, or one in bfloat16, reached the user as torch's
    own RuntimeError / "Got unsupported ScalarType BFloat16", naming no argument."""
    torch = pytest.importorskip("torch")
    import rad

    g = torch.rand(1000)
    with pytest.raises(TypeError, match=r"gains cannot be read.*detach"):
        rad.select(g.clone().requires_grad_(True), 10.0, 5)
    with pytest.raises(TypeError, match=r"losses cannot be read.*BFloat16"):
        rad.select(g, 10.0, 5, losses=g.to(torch.bfloat16))
    with pytest.raises(TypeError, match=r"q cannot be read"):
        rad.depround(torch.full((10,), 0.1, requires_grad=True))
    assert rad.select(g, 10.0, 5, rng=0).shape == (5,)  # a plain CPU tensor is read in place


def test_a_solution_without_arrays_says_why_it_has_no_q() -> None:
    """A solution of gains given on a GPU keeps no arrays (rad._solve.device): asking it for
    q said 'solve the game with rad.solve', which is what the user had done."""
    from dataclasses import replace

    import numpy as np

    import rad

    sol = replace(rad.solve(np.random.default_rng(0).random(100), 10.0, 5), gains=None, losses=None)
    with pytest.raises(ValueError, match="keeps no arrays.*rad.select"):
        sol.probabilities()
