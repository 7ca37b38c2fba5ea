"""benchmarks/gpu_timeline.py's attribution of GPU idle time, on a hand-made trace."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks"))
from gpu_timeline import idle_by_function  # noqa: E402


def _frame(name: str, ts: float, dur: float, tid: int = 1) -> dict:
    return {"cat": "python_function", "name": name, "ts": ts, "dur": dur, "tid": tid}


def test_idle_time_goes_to_the_innermost_frame() -> None:
    # select runs 0-100 us; the GPU is busy 10-30 and 60-70; _depround (rad) runs 35-95 and
    # calls numba's launch 40-50. Idle: 0-10 and 30-35 in select, 35-40, 50-60 and 70-95
    # in _depround (40-50 in launch), 95-100 in select again.
    events = [
        _frame("rad/_solve/api.py(77): select", 0, 100),
        _frame("rad/_backends/cuda_backend.py(1): _depround", 35, 60),
        _frame("numba_cuda/numba/cuda/dispatcher.py(493): launch", 40, 10),
        _frame("torch/autograd/profiler.py(1): other_thread", 0, 100, tid=2),  # another thread: ignored
        {"cat": "kernel", "name": "k1", "ts": 10, "dur": 20},
        {"cat": "gpu_memcpy", "name": "copy", "ts": 60, "dur": 10},
    ]
    got = idle_by_function(events, step_us=1.0)
    assert got["call_us"] == 100 and got["gpu_busy_us"] == 30 and got["gpu_idle_us"] == 70
    assert got["gaps"] == 3
    by_fn = got["idle_by_innermost_function_us"]
    assert by_fn["rad/_solve/api.py(77): select"] == pytest.approx(20)
    assert by_fn["numba_cuda/numba/cuda/dispatcher.py(493): launch"] == pytest.approx(10)
    assert by_fn["rad/_backends/cuda_backend.py(1): _depround"] == pytest.approx(40)
    by_rad = got["idle_by_innermost_rad_function_us"]  # launch's time is _depround's within rad
    assert by_rad["rad/_backends/cuda_backend.py(1): _depround"] == pytest.approx(50)
    assert "torch/autograd/profiler.py(1): other_thread" not in by_fn


def test_a_trace_without_gpu_events_says_so() -> None:
    assert "error" in idle_by_function([_frame("rad/_solve/api.py(77): select", 0, 10)])
