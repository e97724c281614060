"""The CPU emulation (NumPy): the same algorithms as the GPU kernels, in the same loop order,
writing the same trace, plus its wall-clock timing."""
