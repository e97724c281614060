"""One GPU job at a time per process: every GPU run and benchmark holds GPU_LOCK.

Timings taken while another job shares the GPU would be wrong, and two large naive runs
at once could exhaust its memory. The lock is not re-entrant: take it once, at the top.
"""
import threading

GPU_LOCK = threading.Lock()
