"""The CPU emulation (NumPy): the same algorithms as the GPU kernels, in the same loop order,
writing the same traces, plus their wall-clock timing.

  forward.py   naive attention and the FA2 forward loop (query tiles vectorised, key tiles in
               order) with the online-softmax trace (tile rules: engine.model.tiles).
  backward.py  naive backward (P, dP, dS materialised) and the FA2 backward loop (key tile j
               outer, query tile i inner, P_ij rebuilt from lse) with the backward trace.
  timing.py    wall-clock timing of either direction (benchmark_numpy), labelled as CPU.
"""
