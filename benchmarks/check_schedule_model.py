"""The schedule model (benchmarks/schedule_model.py) that lab/NOTES.md's launch-order
predictions come from, checked against the two causal / non-causal ratios it was calibrated on
(measured on an H200 on 2026-11-21) and for the invariants of its split variants. Run it after
changing the model; it is not part of the unit suite, since its targets are one GPU's
measurements.

  python -m benchmarks.check_schedule_model
  python -m pytest benchmarks/check_schedule_model.py      (the same checks)
"""
import argparse
import sys

import numpy as np

from benchmarks import schedule_model


def test_the_schedule_model_matches_its_calibration_points():
    """Causal / non-causal of the old launch order at B·H = 32 as measured on 2026-11-21
    (0.61 at N = 4096, 0.54 at N = 8192), within 0.03; and the new order never slower in the
    model at the forward-parity shapes (N 512-4096, B·H·N = 32k)."""
    measured = {4096: 0.61, 8192: 0.54}
    for n, want in measured.items():
        tiles = n // 128
        plain = schedule_model.makespan(schedule_model.items(tiles, 32, False, "per-bh", 132),
                                        132, 1.7, "per-bh")
        causal = schedule_model.makespan(schedule_model.items(tiles, 32, True, "per-bh", 132),
                                         132, 1.7, "per-bh")
        assert abs(causal / plain - want) <= 0.03, (n, causal / plain)
    rows = schedule_model.table(132, 1.7, 0.6, [(n, 32768 // n) for n in (512, 1024, 4096)])
    by = {(n, order): causal for n, _, order, _, causal, _ in rows}
    for n in (512, 1024, 4096):
        assert by[(n, "global")] <= by[(n, "per-bh")] + 1e-9
        assert by[(n, "persistent")] <= by[(n, "strided")] + 1e-9
    assert np.isclose(by[(1024, "per-bh")] / by[(1024, "global")], 1.46, atol=0.02)


def test_split_variants_keep_every_tile_and_the_even_share_is_the_floor():
    """The split variants of the model (not built) deal out exactly the causal row's key
    tiles, no part longer than the cut; at B·H = 4, N = 4096 no cut reaches the even share's
    causal / non-causal, and the even share is within the fixed and merge costs of the
    total work over the SMs."""
    tiles, bh, sms = 32, 4, 132
    for cut in (32, 16, 10, 7):
        work, parts = schedule_model.split_items(tiles, bh, cut)
        sizes = [t for _, t in work]
        assert sum(sizes) == bh * tiles * (tiles + 1) // 2 and max(sizes) <= cut
        assert sizes == sorted(sizes, reverse=True)
        assert parts == bh * sum(-(-n // cut) for n in range(1, tiles + 1) if n > cut)
    rows = schedule_model.split_table(sms, 1.7, 0.3, [(4096, bh)], (32, 16, 12, 10, 8))
    ratio = {name: r for *_, name, _, _, r in rows}
    assert ratio["split:32"] == 1.0
    assert all(ratio["even"] < r for name, r in ratio.items() if name != "even")
    even = next(c for *_, name, _, c, _ in rows if name == "even")
    assert np.isclose(even, bh * tiles * (tiles + 1) / 2 / sms + 1.7 + 0.6)


if __name__ == "__main__":
    argparse.ArgumentParser(prog="python -m benchmarks.check_schedule_model",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    checks = [f for name, f in sorted(globals().items()) if name.startswith("test_")]
    for check in checks:
        check()
        print(f"ok  {check.__name__}")
    sys.exit(0)
