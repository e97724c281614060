"""The GPU side of the engine (CuPy): backend dispatch, runtime and lock, the naive baseline,
the timing harness, PyTorch reference lines and the flash-kernel launchers.

Nothing here imports CuPy at module level, so the package imports on machines without a GPU.
The facts the launchers share with the model (the kernel catalog, threads per block, shared
memory layouts, tile rules) live in engine.model; the app reaches this package only through
engine.facade.
"""
