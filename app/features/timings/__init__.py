"""The Timings page: measured and recorded timings, the sweep over N, the memory model."""
