"""The compute-capability gate (engine.model.arch) on any machine: what each GPU generation
runs, the message for what it cannot, and the engine applying it before any compile."""
import pytest

from engine.model import arch, registry
from engine.model.config import ConfigError
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


def test_turing_runs_the_tensor_core_forward_in_float16_but_not_its_backward():
    t4 = PROFILES["T4"]
    assert arch.refusal(t4.name, "7.5", "float16", "tensorcore", "forward") is None
    message = arch.refusal(t4.name, "7.5", "float16", "tensorcore", "backward")
    assert "64 KiB" in message and "teaching kernel" in message.split("instead:")[1]


def test_99_kib_gpus_keep_the_backward_shapes_that_fit():
    l4 = PROFILES["L4"]
    assert arch.refusal(l4.name, l4.compute_capability, "float16", "tensorcore",
                        "backward") is None
    gen = arch.generation(l4.compute_capability)
    fitting = arch.shapes_on(registry.BY_KEY["backward mma.sync"], gen)
    assert fitting and set(fitting) < set(registry.BY_KEY["backward mma.sync"].shapes)


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
