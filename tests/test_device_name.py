"""A CPU's device name says which CPU it is: verdicts, measured peaks and leaderboards are grouped by it, and an
exported package dispatches by it, so two machines whose kernels time (or even run) differently must not share one.
Every x86 machine used to be "CPU x86_64"."""

from __future__ import annotations

from pathlib import Path

from evaluator.device.info import cpu_name, device_info

XEON = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)   Processor\nflags\t\t: fpu\n"
EPYC = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14 96-Core Processor\n"
ARM = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n\nModel\t\t: Raspberry Pi 5 Model B Rev 1.0\n"


def test_the_name_is_the_model_from_cpuinfo(tmp_path):
    for name, text in (("xeon", XEON), ("epyc", EPYC), ("arm", ARM)):
        (tmp_path / name).write_text(text)
    assert cpu_name(tmp_path / "xeon") == "CPU Intel(R) Xeon(R) Processor"  # spaces collapsed
    assert cpu_name(tmp_path / "epyc") == "CPU AMD EPYC 9R14 96-Core Processor"
    assert cpu_name(tmp_path / "arm") == "CPU Raspberry Pi 5 Model B Rev 1.0"


def test_without_cpuinfo_the_name_falls_back_to_the_architecture(tmp_path):
    name = cpu_name(tmp_path / "missing")
    assert name.startswith("CPU ") and len(name) > len("CPU ")


def test_this_machines_cpu_device_is_named_by_its_model():
    name = device_info("cpu").name
    model = next((line.split(":", 1)[1].split() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), None)
    assert name == (f"CPU {' '.join(model)}" if model else cpu_name())
