"""Lab: consumer turns (PINGPONG) once more, after the 16-byte stores (lab/wide_stores.py).
With turns, a consumer's epilogue and first softmax lie between two of its turns, so the
other consumer waits for them; the old epilogue took 2,800–3,800 cycles (lab/phase_clock.py),
more than a key tile, and FP8 at d = 128 ran 3–7% slower with turns. With the epilogue a
fraction of that, turns may pay. Builds: float16 with turns (the launcher's) and without,
FP8 128 × 192 without turns (the launcher's) and with; each checked (lab/kv_stages.py's
checks), then timed alternately at d = 128, non-causal, B·H·N = 32k tokens × 8 heads,
N = 1k–16k. Run on a Hopper GPU: python3 lab/turns_after_stores.py"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402


def main():
    kv_stages.BUILDS = {
        "f16 turns": (False, 128, {}),
        "f16 no turns": (False, 128, {"PINGPONG": 0}),
        "fp8 192 no turns": (True, 192, {}),
        "fp8 192 turns": (True, 192, {"PINGPONG": 1}),
    }
    kv_stages.SEQS = (1024, 2048, 8192, 16384)
    kv_stages.main()


if __name__ == "__main__":
    main()
