"""The native coder's facts about the CPU come from Linux's own files: model, SIMD width from the flags, caches from
sysfs, the cores this process may use; what cannot be read stays unknown, and measured figures are passed in."""

from __future__ import annotations

from pathlib import Path

from agents.cpu_facts import MeasuredRoofline, cache_sizes_kib, local_cpu_facts, parse_cpuinfo, simd_of

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse4_2 avx fma avx2 f16c
processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse4_2 avx fma avx2 f16c avx512f
"""


def _cache(root: Path, index: int, level: int, kind: str, size: str) -> None:
    d = root / f"index{index}"
    d.mkdir(parents=True)
    (d / "level").write_text(f"{level}\n")
    (d / "type").write_text(f"{kind}\n")
    (d / "size").write_text(f"{size}\n")


def test_the_first_processor_names_the_model_and_flags():
    name, flags = parse_cpuinfo(CPUINFO)
    assert name == "Intel(R) Xeon(R) Platinum 8480+"
    assert "avx2" in flags and "avx512f" not in flags  # the first processor's flags only


def test_simd_is_the_widest_flag():
    assert simd_of(("sse4_2", "avx", "avx2")) == "AVX2 (256-bit, 8 floats)"
    assert simd_of(("avx2", "avx512f")) == "AVX-512 (512-bit, 16 floats)"
    assert simd_of(("fp", "asimd")) == "NEON (128-bit, 4 floats)"
    assert simd_of(("fpu",)) is None


def test_caches_are_read_from_sysfs_without_the_instruction_cache(tmp_path):
    _cache(tmp_path, 0, 1, "Data", "48K")
    _cache(tmp_path, 1, 1, "Instruction", "32K")
    _cache(tmp_path, 2, 2, "Unified", "2048K")
    _cache(tmp_path, 3, 3, "Unified", "105M")
    assert cache_sizes_kib(tmp_path) == {"l1d": 48, "l2": 2048, "l3": 105 * 1024}


def test_local_facts_from_given_files_and_measured_figures(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(CPUINFO)
    _cache(tmp_path / "cache", 0, 1, "Data", "48K")
    facts = local_cpu_facts(MeasuredRoofline(copy_bandwidth_gbps=210.0, peak_gflops=None), cpuinfo=info,
                            cache_dir=tmp_path / "cache")
    assert facts.name == "Intel(R) Xeon(R) Platinum 8480+" and facts.simd == "AVX2 (256-bit, 8 floats)"
    assert facts.flags == ("fma", "avx2", "f16c") and facts.l1d_kib == 48 and facts.l3_kib is None
    assert facts.copy_bandwidth_gbps == 210.0 and facts.peak_gflops is None and facts.cores and facts.cores >= 1


def test_unreadable_files_leave_figures_unknown(tmp_path):
    facts = local_cpu_facts(cpuinfo=tmp_path / "missing", cache_dir=tmp_path / "missing-dir")
    assert facts.name == "CPU" and facts.simd is None and facts.l2_kib is None and facts.copy_bandwidth_gbps is None
