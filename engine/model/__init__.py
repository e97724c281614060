"""The pure model of FlashAttention Lab: everything the engine, the app and the tests compute
from a config alone, without running attention and without CuPy.

  config.py, decode_config.py  AttentionConfig and DecodeConfig, their allowed values
  limits.py, guards.py         server limits and the checks made before any allocation
  devices.py                   datasheet GPU profiles and the memory pyramid
  catalog.py                   which kernel build takes which config
  launch.py                    threads per block of every kernel build
  tiles.py                     tile geometry: the ragged and causal tile rules
  iomodel.py                   every byte count: shared memory, HBM traffic, peak memory
  tilemodel.py                 the tile-size explorer's occupancy, waves and roofline times
  stream_k.py                  the stream-K schedule and its cost model
  timing_stats.py              a timing's spread and the CPU timing's call budget

It imports neither backend (engine.cpu, engine.gpu) nor anything above the engine
(pyproject.toml's [tool.importlinter] contracts).
"""
