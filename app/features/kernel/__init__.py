"""The Kernel page: CUDA sources, compile facts, the block-to-SM schedule."""
