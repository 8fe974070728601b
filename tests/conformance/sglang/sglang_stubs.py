"""Device facts and compiled kernels, stubbed, so SGLang 0.5.23's own Python can choose kernels on a CPU.

Only two kinds of things are replaced, both below SGLang's selection logic:
- what the GPU reports: torch's CUDA queries (capability, name, memory, count), torch's CUDA version,
  and the NVIDIA driver version SGLang reads from nvidia-smi;
- the compiled libraries of sglang-kernel and sgl-deep-gemm: .ci/venv-sglang.sh removed their shared
  objects and kept the operator schemas they register; the same operators are registered here with an
  implementation that raises when called, so every feature probe (hasattr, getattr, op lookups) sees
  exactly the real library's operator set.

FlashInfer's Python is the real package (its kernels are JIT/cubins, loaded only when one runs).
"Absent" is what a missing package looks like to importlib: sys.modules[name] = None, so
``import`` fails and ``importlib.util.find_spec`` answers None (SGLang's is_flashinfer_available).
Run in the .venv-sglang interpreter, before anything imports sglang.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import types
from pathlib import Path

# The CUDA build a default install has: sglang 0.5.23 pins flashinfer-python[cu13], cuda-python>=13.
CUDA_VERSION = "13.0"
# A driver below 595: the gpt-oss override switches Blackwell parts other than sm_10x/12x from
# triton_kernel to triton at >= 595 (arg_groups/model_overrides/gpt_oss.py:108-115); explain cannot see
# the driver, so the suite pins one that keeps SGLang's default.
DRIVER_VERSION = "580.95.05"
_MiB = 1 << 20


class _StubOp:
    def __init__(self, qualname: str):
        self.qualname = qualname

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.qualname}: compiled kernel stubbed (no GPU in the conformance suite)")


# Tensor-free operators are a library's settings and queries, not kernels (deep_gemm calls init() when it is
# imported, SGLang sets the SM count): setters are kept, getters answer what was set or the library default.
_SETTINGS: dict[str, object] = {"num_sms": 132, "tc_util": 100, "pdl": False, "deterministic_algorithms": False,
                                "mk_alignment_for_contiguous_layout": 128}
_RETURN_DEFAULTS = {"int": 0, "bool": False, "str": "", "float": 0.0}


class _SettingOp:
    def __init__(self, name: str, returns: str):
        self.name, self.returns = name, returns

    def __call__(self, *args, **kwargs):
        key = self.name.removeprefix("set_").removeprefix("get_").removeprefix("use_")
        if self.returns == "()":
            if args and self.name.startswith(("set_", "use_")):
                _SETTINGS[key] = args[0]
            return None
        return _SETTINGS.get(key, _RETURN_DEFAULTS.get(self.returns, None))


# TORCH_LIBRARY schemas as a shared library stores them: name(args) -> returns
_SCHEMA = re.compile(rb"(?<![\w.])([a-z_][a-z0-9_]*\((?:(?:Tensor|int|float|bool|str|ScalarType|SymInt|Scalar"
                     rb"|Device|Layout)[^\x00\n]{0,2000}?)?\) -> [^\x00\n]+)")


def save_schemas(site: Path, out: Path, packages: list[str]) -> None:
    """For every shared library of PACKAGES under SITE, write the operator schemas it registers to
    OUT/<package>/<library path, / as _>.txt (run by .ci/venv-sglang.sh before it deletes the library)."""
    for pkg in packages:
        (out / pkg).mkdir(parents=True, exist_ok=True)
        for so in sorted((site / pkg).rglob("*.so")):
            # schemas are NUL-terminated strings holding ") -> ": only the strings around each one are searched
            data, found_set = so.read_bytes(), set()
            i = data.find(b") -> ")
            while i != -1:
                end = data.find(b"\0", i)
                end = len(data) if end == -1 else end
                found_set.update(_SCHEMA.findall(data[data.rfind(b"\0", 0, i) + 1:end]))
                i = data.find(b") -> ", end)
            found = sorted(m.decode("ascii", "replace") for m in found_set)
            name = str(so.relative_to(site / pkg)).replace("/", "_")
            (out / pkg / f"{name}.txt").write_text("".join(f"{line}\n" for line in found))


def _libraries(pkg: str, sm: int) -> list[Path]:
    """The libraries PKG loads on a GPU of compute capability SM: sgl_kernel loads sm90/common_ops on
    sm_90 and sm100/common_ops everywhere else (sgl_kernel/load_utils.py:48-68@sglang-kernel-0.4.10)."""
    folder = Path(sys.prefix) / "op-schemas" / pkg
    files = sorted(folder.glob("*.txt"))
    if pkg == "sgl_kernel":
        skip = "sm100_common_ops" if sm == 90 else "sm90_common_ops"
        files = [f for f in files if not f.name.startswith(skip)]
    return files


def _register_schemas(namespace: str, schema_files: list[Path]) -> int:
    """Define NAMESPACE::op for every schema the removed libraries registered; each raises when run."""
    import torch

    lib = torch.library.Library(namespace, "FRAGMENT")
    _LIBS.append(lib)
    defined: set[str] = set()
    for schema_file in schema_files:
        for line in schema_file.read_text().splitlines():
            name = line.split("(", 1)[0]
            if not line or name in defined:
                continue
            try:
                lib.define(line)
            except RuntimeError:
                continue  # a schema torch cannot parse: that operator then looks absent, as if not built
            returns = line.rsplit(") -> ", 1)[1].strip()
            op = _SettingOp(name, returns) if "Tensor" not in line and returns in ("()", "int", "bool", "str", "float") \
                else _StubOp(f"{namespace}::{name}")
            lib.impl(name, op, "CompositeExplicitAutograd")
            defined.add(name)
    return len(defined)


_LIBS: list = []


def install(sm: int, *, name: str = "NVIDIA GPU", memory_gb: float = 80.0, sm_count: int = 132,
            flashinfer: bool = True, deepgemm: bool = True) -> None:
    """Make torch report one GPU of compute capability SM (e.g. 86) and set up the compiled stubs."""
    import torch

    major, minor = divmod(sm, 10)
    total = int(memory_gb * 1024) * _MiB
    _SETTINGS["num_sms"] = sm_count
    props = types.SimpleNamespace(
        major=major, minor=minor, name=name, total_memory=total, multi_processor_count=sm_count,
        L2_cache_size=50 * _MiB, warp_size=32, regs_per_multiprocessor=65536,
        max_threads_per_multi_processor=2048, shared_memory_per_block_optin=227 * 1024,
        gcnArchName="", uuid="00000000-0000-0000-0000-000000000000", is_integrated=False)
    torch.version.cuda = CUDA_VERSION
    cuda = torch.cuda
    cuda.is_available = lambda: True
    # "initialized" makes SGLang's get_device_sm() ask torch, not NVML (utils/common.py:756-766)
    cuda.is_initialized = lambda: True
    cuda.get_device_capability = lambda device=None: (major, minor)
    cuda.get_device_properties = lambda device=None: props
    cuda.get_device_name = lambda device=None: name
    cuda.device_count = lambda: 1
    cuda.current_device = lambda: 0
    cuda.set_device = lambda device: None
    cuda.mem_get_info = lambda device=None: (int(total * 0.97), total)
    cuda.get_arch_list = lambda: [f"sm_{v}" for v in (80, 86, 89, 90, 100, 103, 110, 120, 121)]

    for namespace, present in (("sgl_kernel", True), ("deep_gemm", deepgemm)):
        if present:
            _register_schemas(namespace, _libraries(namespace, sm))
    if deepgemm:
        # deep_gemm/__init__.py loads _C.so with torch.ops.load_library; its operators are registered above.
        real_load = torch.ops.load_library

        def load_library(path):
            if Path(str(path)).name == "_C.so" and "deep_gemm" in str(path):
                return None
            return real_load(path)

        torch.ops.load_library = load_library
    else:
        sys.modules["deep_gemm"] = None
    if not flashinfer:
        sys.modules["flashinfer"] = None
    # torchvision (imported by SGLang's multimodal configs) comes from PyPI as a CUDA build; the venv
    # script removed its ops library, and these two modules only register meta/autograd kernels for it.
    for mod in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
        sys.modules[mod] = types.ModuleType(mod)
    _fake_nvidia_smi(sm, name, total // _MiB)
    _triton_target(sm)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _fake_nvidia_smi(sm: int, name: str, total_mib: int) -> None:
    """SGLang asks nvidia-smi for the driver version, memory and compute capability (utils/common.py:
    802-830, 1295-1313, 1335-1345); an nvidia-smi on PATH answers those queries for the stubbed GPU."""
    folder = Path(tempfile.mkdtemp(prefix="sglang-stub-smi-"))
    answers = {"driver_version": DRIVER_VERSION, "memory.total": str(total_mib), "name": name,
               "compute_cap": f"{sm // 10}.{sm % 10}"}
    script = folder / "nvidia-smi"
    script.write_text("#!/bin/sh\n"
                      "for a in \"$@\"; do case \"$a\" in --query-gpu=*) q=${a#--query-gpu=};; esac; done\n"
                      "case \"$q\" in\n"
                      + "".join(f"  {k}) echo '{v}';;\n" for k, v in answers.items())
                      + "  *) exit 6;;\nesac\n")
    script.chmod(0o755)
    os.environ["PATH"] = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"


def _triton_target(sm: int) -> None:
    """Triton's active driver answers for the stubbed GPU: its CUDA driver cannot start without libcuda,
    and SGLang's vendored kernels ask it for the target and the device properties."""
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver

    props = torch.cuda.get_device_properties(0)
    device_props = {"max_shared_mem": props.shared_memory_per_block_optin, "multiprocessor_count":
                    props.multi_processor_count, "max_num_regs": props.regs_per_multiprocessor,
                    "warpSize": 32, "sm_clock_rate": 1_800_000, "mem_clock_rate": 2_600_000, "mem_bus_width": 5120}

    class _StubDriver:
        utils = types.SimpleNamespace(get_device_properties=lambda device=0: dict(device_props))

        @staticmethod
        def get_current_target():
            return GPUTarget("cuda", sm, 32)

        @staticmethod
        def get_current_device():
            return 0

        @staticmethod
        def get_current_stream(device=None):
            return 0

        @staticmethod
        def get_active_torch_device():
            return torch.device("cuda", 0)

        @staticmethod
        def is_active():
            return True

    driver.set_active(_StubDriver())


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "save-schemas":
        save_schemas(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:])
    else:
        sys.exit("usage: sglang_stubs.py save-schemas SITE OUT PACKAGE...")
