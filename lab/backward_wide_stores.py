"""Lab: the Hopper backward's dK_j and dV_j in 16-byte stores after a transpose within the
quad (WIDE_STORES, `patches/backward_wide_stores.diff`, onto commit 72a8b39: the forward's
output path of 2026-11-27 applied to the backward's epilogue), against the 4-byte stores.
Prediction (before any GPU run): each block writes 64 KB of dK_j and dV_j once, after all
its query tiles; with 4-byte stores a warp's store touches 8 rows' sectors, half full, as
the forward's output did (2,800-3,800 cycles a run there). A block runs Tr query tiles of
about 5,000 (d = 128) to 6,000 (d = 64) cycles, so the gain is about 3,000 / (Tr · 5,000):
2-4% at N = 1k-2k, under 1% at N >= 8k. Run on a Hopper GPU, after `git apply`:
python3 lab/backward_wide_stores.py [N ...] (default 1024 2048 4096 8192)."""
import sys

sys.path[:0] = ["lab"]
import backward_phases  # noqa: E402

backward_phases.BUILDS = {64: {"16-byte": {}, "4-byte": {"WIDE_STORES": 0}},
                          128: {"16-byte": {}, "4-byte": {"WIDE_STORES": 0}}}
backward_phases.STAMPS = False

if __name__ == "__main__":
    if len(sys.argv) == 1:
        sys.argv += ["1024", "2048", "4096", "8192"]
    backward_phases.main()
