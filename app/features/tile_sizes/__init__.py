"""The Tile sizes page: every (block_q, block_k) modelled and measured."""
