"""The Precision page: number formats side by side, FP8's per-tile scales, the error of 16-bit
and FP8 attention against float64, why P is formed from the running max before its FP8 cast,
and where naive softmax overflows in each format."""
