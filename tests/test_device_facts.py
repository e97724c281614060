"""One source of device facts: every figure of a profile with its kind of source, printed in
the one unit system (engine.model.units), and the rate every model uses picked by dtype and
kernel (engine.model.rates)."""
import json
import math
from pathlib import Path

import pytest

import engine
from engine.model import units
from engine.model.devices import PROFILES, datasheet_profile, device_facts, figure_source
from engine.model.rates import hbm_floor_bandwidth, peak_rate
from engine.model.iomodel import flash_hbm
from engine.model.tilemodel import busy_fraction, model_ms

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
H200, H100, T4 = PROFILES["H200"], PROFILES["H100 SXM"], PROFILES["T4"]


@pytest.mark.parametrize("n,text", [
    (512, "512 B"), (1536, "1.5 KiB"), (57856, "56.5 KiB"), (232448, "227 KiB"),
    (62914560, "60 MiB"), (150109880320, "139.8 GiB"), (16 * 2**30, "16 GiB"),
    (1.31e6, "1.25 MiB"), (99.99 * 2**20, "100 MiB")])
def test_bytes_print_in_binary_units(n, text):
    assert units.format_bytes(n) == text


@pytest.mark.parametrize("gbps,text", [(4800, "4.8 TB/s"), (1555, "1.56 TB/s"),
                                        (3350, "3.35 TB/s"), (300, "300 GB/s")])
def test_bandwidth_prints_in_decimal_units(gbps, text):
    assert units.format_gbps(gbps) == text
    assert units.format_bandwidth(gbps * 1e9) == text


def test_rates_and_missing_figures():
    assert units.format_tflops(989) == "989 TFLOP/s"
    assert units.format_tflops(1979) == "1979 TFLOP/s"
    assert units.format_tflops(19.5) == "19.5 TFLOP/s"
    assert units.format_tflops(float("nan")) == units.format_bytes(None) == "not known"


def test_recorded_device_properties_are_the_profiles():
    """The H100 and H200 profiles hold what cudaGetDeviceProperties read on the project's
    cards (the device block of every recorded file), and say so."""
    seen = 0
    for path in RESULTS.glob("*.json"):
        device = json.loads(path.read_text()).get("device", {})
        gpu = datasheet_profile(device.get("name", ""))
        if gpu is None or not gpu.props_source:
            continue
        seen += 1
        for field in ("sms", "l2_bytes", "memory_bytes", "smem_per_block_optin"):
            if field in device:
                assert getattr(gpu, field) == device[field], (path.name, field)
                assert figure_source(gpu, field)[0] == "CUDA attribute"
    assert seen >= 2
    # the H200's datasheet "141 GB" is neither 141 GiB nor what the card reports
    assert H200.memory_bytes == 150109880320 != 141 * 2**30


def test_every_fact_has_a_kind_and_a_source():
    for gpu in PROFILES.values():
        facts = {f.key: f for f in device_facts(gpu)}
        assert {"sms", "l2_bytes", "memory_bytes", "hbm_gbps", "fp32_tflops", "fp16_tflops",
                "fp8_tflops"} <= set(facts)
        for f in facts.values():
            assert f.kind in ("datasheet", "CUDA attribute", "CUDA guide", "measured")
            assert f.source
        # FP8 tensor cores from compute capability 8.9 (Ada, Hopper) only
        has_fp8 = float(gpu.compute_capability) >= 8.9
        assert (gpu.fp8_tflops == gpu.fp8_tflops) == has_fp8
        assert (facts["fp8_tflops"].text != "not known") == has_fp8
        assert facts["l2_bytes"].text == units.format_bytes(gpu.l2_bytes)
    measured = {f.key: f for f in device_facts(H200) if f.kind == "measured"}
    assert measured["measured_copy_gbps"].text == "4.3 TB/s"
    assert "2026-" in measured["measured_copy_gbps"].source
    assert not [f for f in device_facts(T4) if f.kind == "measured"]


@pytest.mark.parametrize("dtype,kernel,units_word,tflops", [
    ("float32", "teaching", "FP32", 67), ("float16", "teaching", "FP32", 67),
    ("bfloat16", "backward teaching", "FP32", 67), ("float16", "decode", "FP32", 67),
    ("float16", "tensorcore", "16-bit tensor", 989), ("bfloat16", "wgmma", "16-bit tensor", 989),
    ("float16", "backward mma.sync", "16-bit tensor", 989),
    ("float32", "naive", "FP32", 67), ("float16", "naive", "16-bit tensor", 989)])
def test_peak_rate_follows_dtype_and_kernel(dtype, kernel, units_word, tflops):
    rate = peak_rate(H200, dtype, kernel)
    assert rate.tflops == tflops and units_word in rate.units and rate.source == "datasheet"
    assert rate.label.startswith(units.format_tflops(tflops))


def test_peak_rate_has_none_where_no_units_do_it():
    assert math.isnan(peak_rate(H200, "float32", "tensorcore").tflops)
    assert math.isnan(peak_rate(T4, "bfloat16", "naive").tflops)       # no BF16 before 8.0
    assert peak_rate(T4, "float16", "mma.sync").tflops == 65
    assert peak_rate(T4, "float32", "tensorcore").label.startswith("no rate")
    with pytest.raises(ValueError, match="kernel must be one of"):
        peak_rate(H200, "float16", "cuDNN")


def test_tile_model_uses_the_dtype_and_kernel_rate():
    cfg = engine.AttentionConfig(batch=8, heads=16, seq_q=4096, seq_k=4096, head_dim=128,
                                 dtype="float16")
    compute_bound = cfg.flops / (H200.fp32_tflops * 1e12) * 1e3
    assert model_ms(cfg, H200, "teaching", 2) == pytest.approx(compute_bound, rel=0.05)
    # at 989 TFLOP/s the tensor-core kernel is bound by its HBM bytes instead
    busy = busy_fraction(cfg, H200, 2)
    hbm_bound = flash_hbm(cfg).total / (H200.hbm_gbps * 1e9) * 1e3
    assert cfg.flops / (H200.fp16_tflops * 1e12) * 1e3 < hbm_bound < compute_bound
    assert model_ms(cfg, H200, "tensorcore", 2) == pytest.approx(hbm_bound / busy)


def test_one_hbm_floor_at_the_datasheet_bandwidth():
    """A decode step only reads: PyTorch read K and V faster than the copy the H200 measured
    (its recorded floor_fraction passed 1 against it), never faster than the datasheet."""
    floor = hbm_floor_bandwidth(H200)
    assert floor.bytes_per_s == H200.hbm_gbps * 1e9 and "datasheet" in floor.label
    files = [json.loads(path.read_text()) for path in RESULTS.glob("decode_*.json")]
    rates = [r["kv_bytes"] / (r["median_ms"] * 1e-3) for f in files
             if f["device"]["name"] == H200.name for r in f["results"]]
    assert rates and max(rates) > H200.measured_copy_gbps * 1e9      # past the copy figure
    assert max(rates) < floor.bytes_per_s                              # never the datasheet's
    assert hbm_floor_bandwidth(H100).label == "3.35 TB/s (datasheet)"
