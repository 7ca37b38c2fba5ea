"""The backend registry, capability flags, and the package without its accelerators."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rad
from conftest import BACKENDS
from rad._backends import ORDER, get_backend
from rad._backends.canonical import BLOCK
from rad._backends.contract import Kernels, missing_kernels


def test_report_lists_every_backend() -> None:
    info = rad.backends()
    assert set(info) >= {"cpp", "numba", "numpy", "cuda", "auto", "threads"}
    if not info["cuda"]["available"]:  # no GPU or no numba-cuda: the reason, with the install hint
        assert info["cuda"]["error"]
    assert info["numpy"]["available"] is True
    assert info["auto"] in {"cpp", "numba", "numpy"}
    assert info["threads"] >= 1


@pytest.mark.skipif(os.environ.get("RAD_EXPECT_CPP") != "1", reason="only where the build is required")
def test_compiled_module_is_built_with_openmp() -> None:
    from rad import _core

    info = rad.backends()
    assert info["cpp"]["available"] and info["auto"] == "cpp"
    assert _core.has_openmp is True
    assert _core.BLOCK == BLOCK


def test_forced_backend_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAD_BACKEND", "numpy")
    assert get_backend("auto").name == "numpy"
    monkeypatch.setenv("RAD_BACKEND", "nonsense")
    with pytest.raises(ValueError, match="RAD_BACKEND='nonsense' names no backend"):
        get_backend("auto")
    with pytest.raises(ValueError, match="unknown backend 'nonsense'"):
        get_backend("nonsense")


@pytest.mark.parametrize("name", BACKENDS)
def test_every_backend_implements_the_whole_contract_with_one_signature(name: str) -> None:
    import inspect

    kernels = get_backend(name)
    assert missing_kernels(kernels) == []
    assert isinstance(kernels.SORTFREE, bool) and isinstance(kernels.has_openmp, bool)
    for attr in dir(Kernels):
        if attr.startswith("_"):
            continue
        want = [p for p in inspect.signature(getattr(Kernels, attr)).parameters if p != "self"]
        got = list(inspect.signature(getattr(kernels, attr)).parameters)
        assert got == want, f"{name}.{attr}{tuple(got)} != contract {tuple(want)}"


def test_registry_order_is_fastest_first() -> None:
    assert ORDER == ("cpp", "numba", "numpy")


def test_missing_backend_is_a_clear_error() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["rad._core"] = None
        import rad
        try:
            rad.select([0.1, 0.2], 0.0, 1, backend="cpp")
        except ImportError as e:
            print(type(e).__name__, e)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "BackendUnavailable" in out and "'cpp' backend is not available" in out and "pip install" in out


_HIDDEN = textwrap.dedent(
    """
    import json, sys
    for mod in {hide}:
        sys.modules[mod] = None   # makes "import mod" raise ImportError
    import numpy as np, rad
    g = np.random.default_rng(1).random(70_000)
    out = {{
        "auto": rad.backends()["auto"],
        "select": rad.select(g, 20_000.0, 500, rng=8).tolist(),
        "capped": rad.select(g, 5.0, 30_000, rng=8).tolist()[:50],
        "value": rad.solve(g, 20_000.0, 500).value,
    }}
    print(json.dumps(out))
    """
)


def _run_hidden(hide: list[str]) -> dict:
    res = subprocess.run(
        [sys.executable, "-c", _HIDDEN.format(hide=hide)], capture_output=True, text=True,
        env={**os.environ, "RAD_BACKEND": ""},
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.parametrize(
    "hide, expected",
    [(["rad._core"], "numba"), (["rad._core", "numba"], "numpy"), (["numba"], "cpp")],
)
def test_package_works_with_accelerators_hidden(hide: list[str], expected: str) -> None:
    if expected not in BACKENDS:
        pytest.skip(f"{expected} is not available here")
    got = _run_hidden(hide)
    assert got["auto"] == expected
    g = np.random.default_rng(1).random(70_000)
    assert got["select"] == rad.select(g, 20_000.0, 500, rng=8, backend="numpy").tolist()
    assert got["capped"] == rad.select(g, 5.0, 30_000, rng=8, backend="numpy").tolist()[:50]
    assert got["value"] == rad.solve(g, 20_000.0, 500, backend="numpy").value
