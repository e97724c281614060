"""Launchers of the kernels in kernels/: each checks its operands, compiles its build through
engine.gpu.launchers.core and returns (run, outputs) for the backend and the timing harness."""
