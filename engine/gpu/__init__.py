"""The GPU side of the engine (CuPy): backend dispatch, runtime and lock, the naive baseline,
the timing harness, PyTorch reference lines and the flash-kernel launchers.

Nothing here imports CuPy at module level, so the package imports on machines without a GPU;
engine.gpu.catalog (which kernel takes which config) is used by the app on every machine.
"""
