"""Lab: the two prepared backward steps together, in one run on one GPU — dK_j, dV_j in
16-byte stores (WIDE_STORES, `patches/backward_wide_stores.diff`) and P's exponentials in
two halves (SPLIT_P, `patches/backward_split_p.diff`) — each alone, both, and neither, so
every ratio comes from the same GPU and the same minutes. Predictions are in
`backward_wide_stores.py` and `backward_split_p.py` (before any GPU run). Run on a Hopper
GPU after `git apply` of both patches (onto commit 72a8b39 or later: the kernel is
unchanged since): python3 lab/backward_stores_and_halves.py [N ...] (default 1024 2048
4096 8192)."""
import sys

sys.path[:0] = ["lab"]
import backward_phases  # noqa: E402

_BUILDS = {"both": {}, "wide only": {"SPLIT_P": 0}, "halves only": {"WIDE_STORES": 0},
           "neither": {"WIDE_STORES": 0, "SPLIT_P": 0}}
backward_phases.BUILDS = {64: dict(_BUILDS), 128: dict(_BUILDS)}
backward_phases.STAMPS = False

if __name__ == "__main__":
    if len(sys.argv) == 1:
        sys.argv += ["1024", "2048", "4096", "8192"]
    backward_phases.main()
