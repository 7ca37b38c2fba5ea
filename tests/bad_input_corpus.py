"""The bad- and edge-input corpus of :mod:`test_bad_input`, and its subprocess runner.

Every entry is one call (a Python expression over the namespace built by :func:`namespace`)
or one ``rad`` command line. A *clear answer* is either a sound result or a ``ValueError``
/ ``TypeError`` (a ``UsageError``/exit status 2 with one line on stderr for the CLI) whose
message is not an internal error; anything else (another exception, a traceback, a crash
of the interpreter, a wrong-sized selection) is a failure.

Run as a script, it executes the entries whose numbers it reads from stdin, one per line,
and writes one JSON line per entry (``start`` before, the outcome after), so the parent
sees which entry a crash killed and resumes after it.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import sys
import warnings

import numpy as np

# ----------------------------------------------------------------------------- inputs

_N = 12


def _arrays() -> dict[str, object]:
    base = np.linspace(0.05, 1.0, _N)
    a: dict[str, object] = {
        "ok": base,
        "ok32": base.astype(np.float32),
        "empty": np.zeros(0),
        "one": np.array([0.7]),
        "zeros": np.zeros(_N),
        "negzero": np.array([0.0, -0.0]),
        "nan": np.where(np.arange(_N) == 3, np.nan, base),
        "inf": np.where(np.arange(_N) == 5, np.inf, base),
        "neg": np.where(np.arange(_N) == 1, -0.5, base),
        "subnormal": np.full(_N, 5e-324),
        "subnormal_mix": np.where(np.arange(_N) % 2 == 0, 1e-310, base),
        "huge": np.full(_N, 1e308),
        "max": np.full(_N, np.finfo(np.float64).max),
        "near_max": np.full(_N, 1.7e308),
        "huge_tiny": np.where(np.arange(_N) % 2 == 0, 1e300, 1e-300),
        "wide": 10.0 ** np.linspace(-30, 30, _N),
        "f32_max": np.full(_N, np.finfo(np.float32).max, dtype=np.float32),
        "f32_tiny": np.full(_N, np.finfo(np.float32).smallest_subnormal, dtype=np.float32),
        "ints": np.arange(1, _N + 1),
        "bools": np.ones(_N, dtype=bool),
        "f16": base.astype(np.float16),
        "complex": base.astype(np.complex128),
        "object": base.astype(object),
        "strings": np.array(["a"] * _N),
        "matrix": base.reshape(3, 4),
        "strided": np.linspace(0.05, 1.0, 2 * _N)[::2],
        "big_endian": base.astype(">f8"),
        "big_endian32": base.astype(">f4"),
        "list": base.tolist(),
        "scalar": 0.5,
        "none": None,
        "ties": np.array([1.0, 1.0, 0.5, 0.5, 0.0, 0.0, 1.0, 0.5, 0.0, 1.0, 0.5, 0.25]),
        "one_positive": np.where(np.arange(_N) == 4, 1.0, 0.0),
    }
    return a


GAINS = list(_arrays())
M_VALUES = ["0.0", "1.0", "3.5", f"{_N}.0", f"{_N + 1}.0", "-1.0", "float('nan')", "float('inf')", "'3'", "None",
            "True", "np.float32(2)", "np.int64(2)", "1e-320", f"{_N} - 1e-12"]
B_VALUES = ["0", "1", "2", f"{_N - 1}", f"{_N}", f"{_N + 1}", "-1", "2.5", "2.0", "float('nan')", "'2'", "True",
            "np.int64(3)", "np.uint8(3)", "None", "10**30"]
KW_VALUES = [
    "w=-1.0", "w=float('nan')", "w=float('inf')", "w=0.0", "w=5.0", "w='x'",
    "losses=np.zeros(3)", "losses=-np.ones(12)", "losses=np.full(12, np.nan)", "losses=np.full(12, 1e308)",
    "losses=np.ones(12)", "losses=np.full(12, 5e-324)", "losses=[1.0] * 12", "losses=np.ones((3, 4))",
    "rng=-1", "rng=2**64", "rng=1.5", "rng='x'", "rng=np.random.default_rng(1)", "rng=np.random.SeedSequence(2)",
    "rng=True", "threads=0", "threads=-1", "threads=10**30", "threads=1.5", "threads='2'", "threads=2",
    "backend='x'", "backend='cpp'", "backend='numba'", "backend='numpy'", "backend=None", "method='x'",
    "method='sorted'", "method='sortfree'", "nonsense=1",
]
Q_VECTORS = [
    "np.full(10, 0.5)", "np.array([0.5, 0.2])", "np.array([1.5, -0.5])", "np.array([0.5, np.nan, 0.5])",
    "np.array([1.0, np.inf])", "np.zeros(0)", "np.zeros(5)", "np.ones(5)", "np.full(3, 1/3)",
    "np.full(7, 1/7)", "np.array([1 - 2**-30] * 8 + [8 * 2**-30])", "np.array([5e-324, 1 - 5e-324])",
    "np.full(10, 0.1, dtype=np.float32)", "np.full((2, 2), 0.5)", "[0.5, 0.5]", "np.array(['a', 'b'])",
    "np.full(4, 0.25).astype('>f8')", "np.full(1000, 1e-3)", "np.full(10**6, 1e-6) + 0", "0.5", "None",
    "np.full(1_000_000, 1.0000004)", "np.full(10, 0.5) + 1e-12", "np.full(10, 0.5) + 1e-8",
]

CLI_BAD = [
    ["demo", "--n", "nan"], ["demo", "--n", "inf"], ["demo", "--n", "-1"], ["demo", "--n", "0"],
    ["demo", "--n", "2.5"], ["demo", "--n", "1e20"], ["demo", "--n", "abc"], ["demo", "--n", ""],
    ["demo", "--b", "-3"], ["demo", "--b", "2.5"], ["demo", "--b", "x"], ["demo", "--threads", "0"],
    ["demo", "--threads", "-1"], ["demo", "--threads", "1e30"], ["demo", "--threads", "x"],
    ["demo", "--seed", "-1"], ["demo", "--seed", "x"], ["demo", "--mistake-rate", "nan"],
    ["demo", "--mistake-rate", "-0.1"], ["demo", "--mistake-rate", "1.5"], ["demo", "--mistake-rate", "x"],
    ["demo", "--backend", "x"], ["demo", "--bogus"], ["bogus"], [], ["info", "--bogus"],
    ["experiment", "--rounds", "x"], ["experiment", "--b", "-1", "--bogus"],
]
CLI_OK = [
    ["demo", "--n", "1000", "--b", "5"], ["demo", "--n", "1e3", "--b", "5", "--threads", "1"],
    ["demo", "--n", "10", "--b", "50"], ["demo", "--n", "1", "--b", "0", "--mistake-rate", "1"],
    ["demo", "--n", "100", "--b", "100", "--mistake-rate", "0"], ["info"],
]
#: (argv, environment overrides, modules hidden)
CLI_ENV = [
    (["info"], {"RAD_BACKEND": "x"}, []),
    (["demo", "--n", "100", "--b", "3"], {"RAD_BACKEND": "x"}, []),
    (["demo", "--n", "100", "--b", "3"], {"RAD_NUM_THREADS": "0"}, []),
    (["demo", "--n", "100", "--b", "3"], {"RAD_NUM_THREADS": "x"}, []),
    (["experiment", "--rounds", "1"], {}, ["keras", "tensorflow", "jax", "torch"]),
]


def entries() -> list[dict]:
    """The corpus, in a fixed order."""
    out: list[dict] = []
    calls = ["rad.solve({g}, {m}, {b}{kw})", "rad.select({g}, {m}, {b}{kw})"]
    # every gains variant with ordinary m, b; every m; every b; every keyword
    for call, g in itertools.product(calls, GAINS):
        for m, b in [("3.0", "2"), ("0.0", "1"), (f"{_N}.0", f"{_N}"), ("1.0", "0")]:
            out.append({"py": call.format(g=f"G[{g!r}]", m=m, b=b, kw="")})
    for call, m, b in itertools.product(calls, M_VALUES, B_VALUES):
        out.append({"py": call.format(g="G['ok']", m=m, b=b, kw="")})
    for call, kw, g in itertools.product(calls, KW_VALUES, ["ok", "ok32", "zeros", "ties"]):
        if call.startswith("rad.solve") and kw.startswith("rng="):
            continue
        out.append({"py": call.format(g=f"G[{g!r}]", m="4.0", b="3", kw=", " + kw)})
    for kw, g in itertools.product(KW_VALUES, ["wide", "subnormal_mix", "huge"]):
        if kw.startswith(("rng=", "threads=")):
            continue
        out.append({"py": f"rad.select(G[{g!r}], 4.0, 3, {kw})"})
    for q, kw in itertools.product(Q_VECTORS, ["", ", rng=0", ", rng=-1", ", backend='numpy'", ", threads=0",
                                               ", backend='numba'", ", rng=np.random.default_rng(0)"]):
        out.append({"py": f"rad.depround({q}{kw})"})
    for g in GAINS:
        for m, b in [("3.0", "2"), ("1.0", "0"), (f"{_N}.0", "1")]:
            out.append({"py": f"rad.dask.select(D({g!r}), {m}, {b}, rng=0)"})
        out.append({"py": f"rad.dask.solve(D({g!r}), 3.0, 1)"})
    for q in Q_VECTORS:  # every backend, two seeds
        for backend in ("cpp", "numba", "numpy"):
            out.append({"py": f"rad.depround({q}, rng=3, backend={backend!r})"})
    for argv in CLI_BAD + CLI_OK:
        out.append({"cli": argv, "env": {}, "hide": []})
    for argv, env, hide in CLI_ENV:
        out.append({"cli": argv, "env": env, "hide": hide})
    for i, e in enumerate(out):
        e["id"] = i
    return out


# ----------------------------------------------------------------------------- runner


def namespace() -> dict[str, object]:
    import rad
    import rad.dask

    arrays = _arrays()

    def dask_array(name: str):
        import dask.array as da

        value = arrays[name]
        if not isinstance(value, np.ndarray) or value.ndim != 1 or value.dtype.kind not in "fiub":
            return value  # not an array Dask would wrap as a pool: passed through as is
        return da.from_array(value, chunks=5)

    return {"rad": rad, "np": np, "G": arrays, "D": dask_array}


_CLEAR = (ValueError, TypeError)


def _check_result(expr: str, result: object) -> str | None:
    """None if ``result`` is sound for the call, else why not."""
    import rad

    if expr.startswith(("rad.select", "rad.depround", "rad.dask.select")):
        if not isinstance(result, np.ndarray) or result.dtype != np.int64 or result.ndim != 1:
            return f"not a 1-D int64 array: {result!r}"
        if result.shape[0] > 1 and not np.all(np.diff(result) > 0):
            return "indices not sorted and distinct"
        return None
    if isinstance(result, (rad.Solution, rad.dask.DaskSolution)):
        if np.isnan(result.value):
            return "value is NaN"
        if result.threshold != result.threshold:
            return "threshold is NaN"
        return None
    return f"unexpected result type {type(result).__name__}"


def run_py(expr: str, ns: dict) -> dict:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = eval(expr, ns)  # noqa: S307 - the corpus is this file's own expressions
        except _CLEAR as exc:
            msg = str(exc)
            if not msg or "internal error" in msg:
                return {"ok": False, "why": f"{type(exc).__name__} without a clear message: {msg!r}"}
            return {"ok": True, "outcome": f"{type(exc).__name__}: {msg[:200]}"}
        except Exception as exc:  # noqa: BLE001 - any other exception is what we look for
            return {"ok": False, "why": f"{type(exc).__name__}: {str(exc)[:300]}"}
    why = _check_result(expr, result)
    if why is None and isinstance(result, np.ndarray) and "inf" in str(caught):
        pass
    return {"ok": why is None, "why": why, "outcome": "result", "warnings": [str(w.message)[:120] for w in caught]}


def run_cli(argv: list[str], env: dict, hide: list[str]) -> dict:
    from rad.cli import main

    saved_env = {k: os.environ.get(k) for k in env}
    saved_mods = {k: sys.modules.get(k, None) for k in hide}
    had = {k: k in sys.modules for k in hide}
    os.environ.update(env)
    for k in hide:
        sys.modules[k] = None  # type: ignore[assignment]
    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    crashed = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
            except BaseException as exc:  # noqa: BLE001 - a traceback reaching the user
                crashed = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for k in hide:
            if had[k]:
                sys.modules[k] = saved_mods[k]  # type: ignore[assignment]
            else:
                sys.modules.pop(k, None)
    lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
    if crashed:
        return {"ok": False, "why": f"traceback: {crashed}"}
    if code in (0, None):
        return {"ok": True, "outcome": "exit 0"}
    if code == 2:
        last = lines[-1] if lines else ""
        if not last.startswith("rad") or "Traceback" in err.getvalue():
            return {"ok": False, "why": f"exit 2 without a one-line error: {err.getvalue()[-300:]!r}"}
        return {"ok": True, "outcome": f"exit 2: {last[:200]}"}
    return {"ok": False, "why": f"exit status {code!r} (bad invocations exit 2); stderr {err.getvalue()[-300:]!r}"}


def main() -> None:
    corpus = entries()
    ns = namespace()
    for line in sys.stdin:
        if not line.strip():
            continue
        i = int(line)
        e = corpus[i]
        print(json.dumps({"start": i}), flush=True)
        if "py" in e:
            res = run_py(e["py"], ns)
        else:
            res = run_cli(e["cli"], e["env"], e["hide"])
        res["id"] = i
        print(json.dumps(res, default=str), flush=True)


if __name__ == "__main__":
    main()
