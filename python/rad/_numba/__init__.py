"""Numba fallbacks with the same signatures as the C++ kernels (see :mod:`.backend`)."""
