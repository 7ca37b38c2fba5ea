r"""Compile every cuda-backend kernel to PTX for a GPU architecture, without a GPU.

The CUDA simulator (CI) runs the kernels as Python, so it never type-checks them the way
numba-cuda's compiler does. This script records the argument types of every kernel launch
while ``tests/test_cuda_sim.py``'s checks run on the simulator, then compiles each kernel
with those types for ``--cc`` (default sm_90, the H100/H200) and reports failures, local
memory use and ``fma.rn.f64`` instructions other than the exact ``x * 2^46 + 0.5``; where
``ptxas`` is found (``--ptxas``), also each kernel's registers, shared memory and spills,
which bound how many of its CUDA blocks fit on an SM.

Needs NVVM and NVRTC (no driver)::

    pip install nvidia-nvvm nvidia-cuda-nvrtc nvidia-cuda-runtime
    LD_LIBRARY_PATH=$(python -c "import nvidia, os; print(os.path.join(nvidia.__path__[0], 'cu13', 'lib'))") \\
        PYTHONPATH=python python tools/ptx_check.py

``--sass DIR`` also writes each kernel's machine code (SASS, from ``cuobjdump``, which
needs ``nvdisasm``: ``pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm``) to
``DIR/<kernel>.sass`` and prints its instruction count: a GPU-bound pass that is short of
issue slots (the profiler's reading of the float32 search pass) is sped up by fewer
instructions on its common path, and the listing shows where they go (numba's
negative-index wrap on signed indices, 64-bit counters, conversions). ``--kernels`` limits
the compile to some kernels, ``--sigs FILE`` keeps the recorded launch types for the next
run (recording runs the simulator's checks: minutes).
"""

from __future__ import annotations

import argparse
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_RECORD = r"""
import os, pickle, sys, warnings
warnings.simplefilter("ignore")
import numba
from numba.cuda.simulator.kernel import FakeCUDAKernel
from rad._backends import cuda_backend as cb
sigs = {}
class Rec:
    def __init__(self, name, k):
        self.name, self.k = name, k
    def __getitem__(self, cfg):
        launch = self.k[cfg]
        def call(*args):
            sigs.setdefault(self.name, set()).add(tuple(numba.typeof(getattr(a, "_ary", a)) for a in args))
            return launch(*args)
        return call
for name, v in list(vars(cb).items()):
    if isinstance(v, FakeCUDAKernel) and not getattr(v, "_device", False):
        setattr(cb, name, Rec(name, v))
import test_cuda_sim
for fn in test_cuda_sim.CHECKS.values():
    fn()
with open(sys.argv[1], "wb") as fh:
    pickle.dump({k: list(v) for k, v in sigs.items()}, fh)
"""


def record(path: str) -> None:
    """Run the simulator checks with every launch's argument types written to ``path``."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), os.path.join(ROOT, "tests")]))
    subprocess.run([sys.executable, "-c", _RECORD, path], check=True, env=env, cwd=os.path.join(ROOT, "tests"))


#: Kernels whose float64 arithmetic only steers decisions that carry a rounding margin
#: (cuda_backend's float32 bracket pass): a contracted FMA there changes no result.
STEERING_ONLY = {"_bracket32_kernel", "_queue_bins32_kernel"}


def ptxas_usage(ptx: str, cc: tuple[int, int], ptxas: str, sass: str | None = None) -> str:
    """Registers, shared memory and spills of ``ptx`` from ``ptxas -v`` (what bounds occupancy).

    A ptxas older than the NVVM that wrote the PTX refuses its ``.version``; the line is
    lowered to the ptxas's own version then (these kernels use nothing newer). With
    ``sass`` (a file path), the machine code is disassembled there and its instruction
    count added.
    """
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        for _ in range(2):
            with open(src, "w") as fh:
                fh.write(ptx)
            run = subprocess.run([ptxas, f"-arch=sm_{cc[0]}{cc[1]}", "-v", src, "-o", out],
                                 capture_output=True, text=True)
            found = re.search(r"current version is '([0-9.]+)'", run.stderr)
            if run.returncode == 0 or not found:
                break
            ptx = re.sub(r"^\.version [0-9.]+", f".version {found.group(1)}", ptx, count=1, flags=re.M)
        if run.returncode != 0:
            return f"ptxas failed: {run.stderr.strip().splitlines()[-1] if run.stderr.strip() else run.returncode}"
        regs = re.search(r"Used (\d+) registers", run.stderr)
        smem = re.search(r"(\d+) bytes smem", run.stderr)
        spill = re.search(r"(\d+) bytes spill stores", run.stderr)
        usage = (f"registers {regs.group(1) if regs else '?'}, shared {smem.group(1) if smem else 0} bytes, "
                 f"spills {spill.group(1) if spill else 0} bytes")
        return usage + (f", {disassemble(out, sass)}" if sass else "")


def _cuobjdump() -> str | None:
    """``cuobjdump`` on PATH, else the one of the ``nvidia-cuda-cuobjdump`` wheel."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import nvidia  # type: ignore[import-not-found]
    except ImportError:
        return None
    for root in nvidia.__path__:
        for sub in ("cu13", "cu12", "cuda_cuobjdump"):
            path = os.path.join(root, sub, "bin", "cuobjdump")
            if os.path.exists(path):
                return path
    return None


def disassemble(cubin: str, dest: str) -> str:
    """The SASS of ``cubin`` written to ``dest``; its instruction count (or why there is none)."""
    tool = _cuobjdump()
    if tool is None:
        return "SASS: no cuobjdump"
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(tool), os.environ.get("PATH", "")]))
    run = subprocess.run([tool, "--dump-sass", cubin], capture_output=True, text=True, env=env)
    count = len(re.findall(r"/\*[0-9a-f]{4}\*/\s+[^;]*;", run.stdout))
    if not count:
        return f"SASS: none ({run.stderr.strip().splitlines()[-1] if run.stderr.strip() else 'empty'})"
    with open(dest, "w") as fh:
        fh.write(run.stdout)
    return f"SASS {count} instructions ({dest})"


def compile_all(path: str, cc: tuple[int, int], ptxas: str | None = None, sass: str | None = None,
                kernels: set[str] | None = None) -> int:
    """Compile each recorded (kernel, types) for ``cc``; 1 if any fails.

    With ``ptxas``, also each kernel's registers, shared memory and spills; with ``sass``
    (a folder), its disassembly there. ``kernels``: only those.
    """
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import numba.cuda.dispatcher as dispatcher
    from numba import cuda, types

    class _Device:  # what the compiler asks of the current device
        compute_capability = cc
        MULTIPROCESSOR_COUNT = 132

    cuda.is_available = lambda: True
    dispatcher.get_current_device = lambda: _Device()
    from rad._backends import cuda_backend as cb

    with open(path, "rb") as fh:
        sigs = pickle.load(fh)
    sigs.setdefault("_fill_kernel", [(types.uint32[::1], types.uint32), (types.int64[::1], types.int64)])
    failures = 0
    for name, sig_list in sorted(sigs.items()):
        if kernels and name not in kernels:
            continue
        for k, sig in enumerate(sig_list):
            try:
                ptx, _ = cuda.compile_ptx(getattr(cb, name).py_func, tuple(sig), cc=cc)
            except Exception as exc:  # a typing or lowering error: the GPU would fail the same way
                failures += 1
                print(f"FAIL {name} {[str(t) for t in sig]}\n{exc}")
                continue
            exact = "0d42D0000000000000, 0d3FE0000000000000"  # x * 2^46 + 0.5: exact either way
            fmas = [f for f in re.findall(r"fma\.rn\.f64[^;]*;", ptx) if exact not in f]
            note = "  (steering sums only: allowed)" if fmas and name in STEERING_ONLY else ""
            print(f"ok   {name:24s} local memory: {'yes' if '.local' in ptx else 'no '}  "
                  f"other fma.rn.f64: {len(fmas)}{note}")
            if ptxas:
                dest = os.path.join(sass, f"{name}{f'_{k}' if k else ''}.sass") if sass else None
                print(f"     {'':24s} {ptxas_usage(ptx, cc, ptxas, dest)}")
    print(f"{failures} failures")
    return 1 if failures else 0


def main() -> int:
    """Record, then compile."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cc", default="9.0", help="compute capability (default 9.0)")
    ap.add_argument("--ptxas", default=shutil.which("ptxas"),
                    help="ptxas for registers, shared memory and spills per kernel (default: the one on PATH, if any)")
    ap.add_argument("--sass", metavar="DIR", help="write each kernel's SASS to DIR and count its instructions "
                                                  "(needs ptxas, cuobjdump and nvdisasm)")
    ap.add_argument("--kernels", nargs="+", help="compile only these kernels (e.g. _bracket32_kernel)")
    ap.add_argument("--sigs", metavar="FILE", help="the recorded launch types: read if it exists, else recorded there")
    args = ap.parse_args()
    cc = tuple(int(x) for x in args.cc.split("."))
    if args.sass:
        if not args.ptxas:
            ap.error("--sass needs ptxas (--ptxas)")
        os.makedirs(args.sass, exist_ok=True)
    kernels = set(args.kernels) if args.kernels else None
    with tempfile.TemporaryDirectory() as tmp:
        path = args.sigs or os.path.join(tmp, "sigs.pkl")
        if not os.path.exists(path):
            record(path)
        return compile_all(path, (cc[0], cc[1]), args.ptxas, args.sass, kernels)


if __name__ == "__main__":
    sys.exit(main())
