"""Lab: the Hopper forward's output written in 16-byte stores (flash_wgmma.cu, WIDE_STORES).
lab/phase_clock.py found the epilogue the largest cost of a run besides its tiles: 2,800–3,800
clock cycles a consumer (H100), against 2,500–2,800 for a whole key tile, at every N, float16
and FP8 alike. It wrote each lane's two columns of every 8-column chunk as a 4-byte store, so a
warp's store touched 8 rows' sectors, each half full: 32 stores a thread, 8 requests each. With
the chunks transposed within the quad (3 shuffles for 4 chunks), each lane writes a whole chunk
as one 16-byte store: 8 stores a thread, whole sectors. Prediction: most of the epilogue's
cycles go, about 2,000 a run: at N = 1k (8 key tiles, about 25,500 cycles a run) +7% for
float16; at 8k +1.2% (float16) and +1.6% (FP8).
Each build is checked (lab/kv_stages.py's checks), then all are timed alternately at d = 128,
non-causal, B·H·N = 32k tokens × 8 heads, N = 1k–16k. Run on a Hopper GPU:
python3 lab/wide_stores.py"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402


def main():
    kv_stages.BUILDS = {
        "f16 4-byte stores": (False, 128, {"WIDE_STORES": 0}),
        "f16 16-byte stores": (False, 128, {}),
        "fp8 192 4-byte stores": (True, 192, {"WIDE_STORES": 0}),
        "fp8 192 16-byte stores": (True, 192, {}),
    }
    kv_stages.SEQS = (1024, 2048, 8192, 16384)
    kv_stages.main()


if __name__ == "__main__":
    main()
