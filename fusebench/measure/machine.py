"""The machine and software a run happens on: ASV's machine.json fields plus GPU and library versions.

ASV identifies a machine by name (the host name unless `--machine` says otherwise) and shows
`os`, `arch`, `cpu`, `num_cpu` and `ram`; fusebench adds `gpu`, `gpu_driver`, `torch`, `cuda`,
`nvfuser` and `threads` (torch's intra-op threads when the run started measuring: `--threads`).
All values are strings, as ASV writes them.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import subprocess
import sys
from dataclasses import asdict, dataclass

import torch

NOT_AVAILABLE = "none"


@dataclass(frozen=True)
class MachineInfo:
    """What a result was measured on."""

    machine: str
    os: str
    arch: str
    cpu: str
    num_cpu: str
    ram: str
    gpu: str
    gpu_driver: str
    torch: str
    cuda: str
    nvfuser: str
    python: str
    threads: str = ""

    def as_json(self) -> dict[str, str]:
        """The machine.json document (without ASV's "version" key)."""
        return asdict(self)


def machine_info(name: str | None = None) -> MachineInfo:
    """Describes this machine; `name` overrides the host name."""
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else NOT_AVAILABLE
    return MachineInfo(
        machine=sanitize(name or platform.node() or "unknown-machine"),
        os=f"{platform.system()} {platform.release()}",
        arch=platform.machine(),
        cpu=cpu_model(),
        num_cpu=str(os.cpu_count() or 0),
        ram=str(_ram_bytes()),
        gpu=gpu,
        gpu_driver=_gpu_driver() if torch.cuda.is_available() else NOT_AVAILABLE,
        torch=torch.__version__,
        cuda=torch.version.cuda or NOT_AVAILABLE,
        nvfuser=_nvfuser_version(),
        python=".".join(str(v) for v in sys.version_info[:3]),
        threads=str(torch.get_num_threads()),
    )


def env_name(info: MachineInfo, device: str) -> str:
    """The ASV environment name of a fusebench run: device, Python and torch, e.g.
    'fusebench-cpu-py3.11-torch2.13.0'. Results of different devices never share a file."""
    python = ".".join(info.python.split(".")[:2])
    return sanitize(f"fusebench-{device.split(':')[0]}-py{python}-torch{info.torch}")


def sanitize(text: str) -> str:
    """`text` with every character outside [A-Za-z0-9._-] replaced by '_' (safe in file names)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


def cpu_model() -> str:
    """The CPU's model name."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def _gpu_driver() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        version = torch._C._cuda_getDriverVersion()  # e.g. 13000 for CUDA 13.0
        return f"CUDA driver API {version // 1000}.{version % 1000 // 10}"


def _nvfuser_version() -> str:
    if importlib.util.find_spec("nvfuser_direct") is None:
        return NOT_AVAILABLE
    if not torch.cuda.is_available():
        return "installed (not loaded: no CUDA)"
    try:
        import nvfuser_direct
    except Exception as error:  # NOTE: a broken install is worth reporting, not crashing over
        return f"import failed: {type(error).__name__}"
    return str(getattr(nvfuser_direct, "__version__", "unknown"))
