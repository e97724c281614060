"""The compute-capability gate (engine.model.arch) on any machine: what each GPU generation
runs, the message for what it cannot, and the engine applying it before any compile."""
import pytest

from engine.model import arch, iomodel, registry
from engine.model.config import AttentionConfig, ConfigError
from engine.model.devices import PROFILES


@pytest.mark.parametrize("profile", ["H100 SXM", "H200", "A100 80GB"])
@pytest.mark.parametrize("family", ["teaching", "tensorcore", None])
@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_ampere_and_hopper_run_every_family_in_16_bit(profile, family, direction, dtype):
    gpu = PROFILES[profile]
    assert arch.refusal(gpu.name, gpu.compute_capability, dtype, family, direction) is None


@pytest.mark.parametrize("family,direction", [("teaching", "forward"), ("tensorcore", "forward"),
                                              (None, "forward"), ("teaching", "backward"),
                                              ("decode", "decode")])
def test_turing_refuses_bfloat16_and_says_what_runs(family, direction):
    t4 = PROFILES["T4"]
    message = arch.refusal(t4.name, t4.compute_capability, "bfloat16", family, direction)
    assert message and t4.name in message and "compute capability 7.5" in message
    assert "bfloat16" in message and "8.0" in message
    assert "float16" in message.split("instead:")[1]
    assert "bfloat16" not in message.split("instead:")[1]


def test_turing_runs_the_tensor_core_backward_at_head_dim_64_with_one_query_buffer():
    t4 = PROFILES["T4"]
    build = registry.BY_KEY["backward mma.sync"]
    assert arch.refusal(t4.name, "7.5", "float16", "tensorcore", "forward") is None
    assert arch.refusal(t4.name, "7.5", "float16", "tensorcore", "backward") is None
    assert arch.shapes_on(build, arch.generation("7.5")) == ((64, 64, 64),)
    cfg = AttentionConfig(seq_q=64, seq_k=64, head_dim=64, block_q=64, block_k=64,
                          dtype="float16")
    # Two buffers each of Q_i and dO_i need 64.5 KiB: one more than Turing's 64 KiB block.
    assert iomodel.smem_bytes(cfg, build.smem_layout) > t4.smem_per_block_optin
    budget = iomodel.smem_budget(cfg, t4, build.smem_layout)
    assert budget.fits and "Q_i" in budget.parts and "Q_i (2 buffers)" not in budget.parts


def test_99_kib_gpus_run_head_dim_128_backward_at_64_by_64_with_one_query_buffer():
    l4, h100 = PROFILES["L4"], PROFILES["H100 SXM"]
    build = registry.BY_KEY["backward mma.sync"]
    assert arch.refusal(l4.name, l4.compute_capability, "float16", "tensorcore",
                        "backward") is None
    fitting = arch.shapes_on(build, arch.generation(l4.compute_capability))
    assert (128, 64, 64) in fitting and (128, 64, 128) not in fitting
    assert set(fitting) < set(build.shapes)
    cfg = AttentionConfig(seq_q=64, seq_k=64, head_dim=128, block_q=64, block_k=64,
                          dtype="bfloat16")
    assert iomodel.fitting_layout(cfg, build.smem_layout, l4.smem_per_block_optin) \
        == build.smem_fallback
    assert iomodel.fitting_layout(cfg, build.smem_layout, h100.smem_per_block_optin) \
        == build.smem_layout
    one = iomodel.smem_bytes(cfg, build.smem_fallback)
    two = iomodel.smem_bytes(cfg, build.smem_layout)
    assert one <= l4.smem_per_block_optin < two
    assert two - one == 2 * 64 * 128 * 2 + 2 * 64 * 4     # one Q_i, dO_i, lse_i, D_i less


def test_the_generations_agree_with_the_profiles():
    """Each profile's shared memory per block is its generation's (one fact, two tables)."""
    for p in PROFILES.values():
        gen = arch.generation(p.compute_capability)
        assert gen.cc == p.compute_capability, p.name
        assert gen.smem_optin == p.smem_per_block_optin, p.name


def test_the_table_has_wgmma_on_hopper_only_and_teaching_everywhere():
    for row in arch.generation_table():
        runs = row["runs"]
        assert "teaching" in runs and "decode" in runs
        assert ("wgmma" in runs) == (row["generation"].name == "Hopper")
        assert ("bfloat16" in runs["teaching"]["dtypes"]) == (float(row["generation"].cc) >= 8.0)


@pytest.mark.parametrize("cc,number", [("7.5", 7.5), ("90", 9.0), (8.6, 8.6), ((8, 9), 8.9)])
def test_cc_number_reads_every_spelling(cc, number):
    assert arch.cc_number(cc) == number


def test_the_engine_refuses_before_any_compile(monkeypatch):
    from engine.gpu import runtime
    monkeypatch.setattr(runtime, "live_gpu", lambda: PROFILES["T4"])
    monkeypatch.setattr(runtime, "device_cc", lambda: 7.5)
    with pytest.raises(ConfigError, match="Tesla T4 .compute capability 7.5.* bfloat16"):
        runtime.check_arch("bfloat16", "tensorcore")
    runtime.check_arch("float16", "tensorcore")          # runs: no error


def test_an_unknown_ptx_arch_is_refused(monkeypatch):
    from engine.gpu import runtime
    monkeypatch.setenv("FA_LAB_PTX_ARCH", "compute_61")
    with pytest.raises(runtime.GpuRunError, match="compute_75"):
        runtime.ptx_arch()
    monkeypatch.setenv("FA_LAB_PTX_ARCH", "compute_80")
    assert runtime.ptx_arch() == "compute_80"


def test_the_ptx_override_names_a_generation_or_nothing(monkeypatch):
    monkeypatch.setenv("FA_LAB_PTX_ARCH", "compute_75")
    assert arch.ptx_override_cc() == 7.5
    for value in ("", "compute_61", "sm_75"):
        monkeypatch.setenv("FA_LAB_PTX_ARCH", value)
        assert arch.ptx_override_cc() is None
