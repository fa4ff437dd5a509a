"""The machine's fingerprint (issue 59, item 3): what changes the figures, read from a synthetic
/proc/cpuinfo and sysfs (an AMD host that hides its clock, an Intel one that names it, with AMX),
and the machine kind it keys the noise floors and quiet baselines by: the same on every host of
that fingerprint and at every thread count, "unknown" for a record written before them."""

from __future__ import annotations

import os

import pytest

from sidebyside.lab import quiet
from sidebyside.run import provenance

ZEN3_FLAGS = "fpu sse2 avx avx2 fma avx512f avx512dq avx512_bf16 avx512_vnni"


def _cpuinfo(path, *, vendor="AuthenticAMD", family=25, model=17, stepping=1, name="AMD EPYC", mhz="2596.144",
             flags=ZEN3_FLAGS, microcode="0x1000065", processors=2):
    block = (f"vendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\nmodel name\t: {name}\n"
             f"stepping\t: {stepping}\nmicrocode\t: {microcode}\ncpu MHz\t\t: {mhz}\nflags\t\t: {flags}\n")
    path.write_text("\n".join(f"processor\t: {i}\n{block}" for i in range(processors)))
    return path


def _sysfs(root, caches=(("1", "Data", "32K"), ("1", "Instruction", "32K"), ("2", "Unified", "1024K"),
                         ("3", "Unified", "32768K")), cpufreq=None):
    for i, (level, kind, size) in enumerate(caches):
        index = root / "cache" / f"index{i}"
        index.mkdir(parents=True)
        (index / "level").write_text(level + "\n")
        (index / "type").write_text(kind + "\n")
        (index / "size").write_text(size + "\n")
    for name, khz in (cpufreq or {}).items():
        (root / "cpufreq").mkdir(exist_ok=True)
        (root / "cpufreq" / name).write_text(f"{khz}\n")
    return root


def test_an_amd_host_that_hides_its_clock_is_fingerprinted_from_cpuinfo_and_sysfs(tmp_path):
    found = provenance.cpu_fingerprint(_cpuinfo(tmp_path / "cpuinfo"), _sysfs(tmp_path / "cpu0"))
    assert found == {"vendor": "AuthenticAMD", "family": 25, "model": 17, "stepping": 1, "model_name": "AMD EPYC",
                     "vector": ["avx2", "avx512f", "avx512_bf16"], "l2_kib": 1024, "l3_kib": 32768,
                     "clock_mhz": 2600}  # "cpu MHz" rounded to 100 MHz: no GHz in the name, no cpufreq
    kind = provenance.machine_kind({"cpu": found, "gpu": None})
    assert kind == ("AMD EPYC (AuthenticAMD family 25 model 17 stepping 1; AVX2, AVX-512F, AVX-512 BF16; "
                    "L2 1 MiB, L3 32 MiB; 2.6 GHz)")


def test_an_intel_host_s_clock_comes_from_its_model_name_and_amx_is_named(tmp_path):
    cpuinfo = _cpuinfo(tmp_path / "cpuinfo", vendor="GenuineIntel", family=6, model=143, stepping=8,
                       name="Intel(R) Xeon(R) Platinum 8480+ @ 2.00GHz", mhz="3799.998",
                       flags="avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8")
    cpu0 = _sysfs(tmp_path / "cpu0", caches=(("2", "Unified", "2048K"), ("3", "Unified", "107520K")),
                  cpufreq={"cpuinfo_max_freq": 3800000})
    found = provenance.cpu_fingerprint(cpuinfo, cpu0)
    assert found["vector"] == ["avx2", "avx512f", "avx512_bf16", "amx_tile"] and found["clock_mhz"] == 2000
    assert found["l2_kib"] == 2048 and found["l3_kib"] == 107520
    assert "AMX" in provenance.machine_kind({"cpu": found}) and "L3 105 MiB" in provenance.machine_kind({"cpu": found})
    # Without a clock in the name: cpufreq's base frequency, else its maximum.
    no_name = _cpuinfo(tmp_path / "cpuinfo2", vendor="GenuineIntel", name="Intel Xeon Processor", mhz="1200.0")
    assert provenance.cpu_fingerprint(no_name, cpu0)["clock_mhz"] == 3800
    (cpu0 / "cpufreq" / "base_frequency").write_text("2100000\n")
    assert provenance.cpu_fingerprint(no_name, cpu0)["clock_mhz"] == 2100


def test_hosts_of_one_fingerprint_share_a_kind_whatever_their_threads_cores_or_clock_jitter(tmp_path, monkeypatch):
    cpu0 = _sysfs(tmp_path / "cpu0")
    one = provenance.cpu_fingerprint(_cpuinfo(tmp_path / "a", mhz="2596.144", processors=2), cpu0)
    other = provenance.cpu_fingerprint(_cpuinfo(tmp_path / "b", mhz="2595.872", microcode="0x1000070",
                                                processors=16), cpu0)
    assert one == other
    # The kind this process reports does not move when threads are limited (it was "(2 cores)", then "(1 core)").
    kinds = set()
    for allowed in ({0, 1}, {0}):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, allowed=allowed: allowed, raising=False)
        kinds.add(quiet.machine_kind())
    assert len(kinds) == 1 and "core" not in kinds.pop()


def test_a_missing_cpuinfo_leaves_fields_unknown_and_a_record_without_a_fingerprint_is_unknown(tmp_path):
    found = provenance.cpu_fingerprint(tmp_path / "absent", tmp_path / "absent-cpu0")
    assert found["family"] is None and found["l3_kib"] is None and found["vector"] == []
    assert "family None" in provenance.machine_kind({"cpu": found}) and "L3 unknown" in provenance.machine_kind(
        {"cpu": found})
    assert provenance.machine_kind(None) == provenance.machine_kind({}) == "unknown"


def test_the_gpu_fingerprint_is_nvidia_smi_s_model_memory_clocks_and_driver():
    class Done:
        returncode, stdout = 0, "NVIDIA H100 80GB HBM3, 81559, 1980, 2619, 550.54.15\n"

    found = provenance.gpu_fingerprint(run=lambda *a, **k: Done())
    assert found == {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "sm_clock_mhz": 1980,
                     "memory_clock_mhz": 2619, "driver": "550.54.15"}
    assert provenance.machine_kind({"cpu": {}, "gpu": found}, gpu=True) == (
        "NVIDIA H100 80GB HBM3 (81559 MiB; SM 1980 MHz, memory 2619 MHz; driver 550.54.15)")

    def missing(*a, **k):
        raise FileNotFoundError("nvidia-smi")

    assert provenance.gpu_fingerprint(run=missing) is None


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="Linux only")
def test_the_provenance_records_the_fingerprint_and_the_kind_apart_from_the_threads():
    record = provenance.collect()
    assert record["fingerprint"]["cpu"] == provenance.cpu_fingerprint()
    assert record["machine_kind"] == provenance.machine_kind(record["fingerprint"], gpu=record["device_kind"] == "gpu")
    assert record["threads"]["cpus_online"] == os.cpu_count() and "cpu_affinity" in record["threads"]
