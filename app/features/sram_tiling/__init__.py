"""The SRAM tiling page: shared memory of one block, the loop over tiles, waves."""
