"""Make vLLM 0.33.0's own selection code run on a CPU-only machine as if one GPU were present.

Runs inside .venv-vllm only (never imported by the advisor or by pytest). What is replaced is limited to
hardware and build facts: the compiled extensions (which cannot load without libcuda), the five capability
queries vLLM asks them, the device queries of torch/Triton/NVML, and the subprocess vLLM's model registry
spawns to avoid initialising CUDA. No selection logic is replaced: vLLM's own CudaPlatformBase, kernel
lists, oracles and quantization configs decide.
"""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass

# The capability queries vLLM's C++ extension answers, re-typed for the 0.33.0 wheel (CUDA 13 build, every
# ENABLE_* flag on): csrc/quantization/w8a8/cutlass/scaled_mm_entry.cu:147-197,
# csrc/quantization/fp4/nvfp4_scaled_mm_entry.cu:71-87, csrc/quantization/fp4/mxfp4_experts_quant.cu:383-389@0.33.0.
CAPABILITY_QUERIES = {
    "cutlass_scaled_mm_supports_fp8": lambda cc: cc >= 89,
    "cutlass_scaled_mm_supports_block_fp8": lambda cc: cc >= 90,
    "cutlass_group_gemm_supported": lambda cc: 90 <= cc < 120,
    "cutlass_scaled_mm_supports_fp4": lambda cc: 100 <= cc < 130,
    "mxfp4_experts_quant_supported": lambda cc: 100 <= cc < 120,
}
# Extension modules of the wheel (shared objects linked against libcuda).
_EXTENSIONS = (
    "vllm._C", "vllm._C_stable_libtorch", "vllm._moe_C", "vllm._moe_C_stable_libtorch", "vllm._qutlass_C",
    "vllm._flashmla_C", "vllm._flashmla_extension_C", "vllm.cumem_allocator", "vllm._rocm_C",
    "vllm.vllm_flash_attn._vllm_fa2_C", "vllm.vllm_flash_attn._vllm_fa3_C", "vllm._flashkda_C",
)
_OP_NAMESPACES = ("_C", "_moe_C", "_rocm_C", "_C_cache_ops", "_C_custom_ar", "_qutlass_C", "_flashmla_C",
                  "_flashmla_extension_C", "_vllm_fa2_C", "_vllm_fa3_C", "_C_utils", "deep_gemm",
                  "_flashkda_C")
# Compiled entry points a constructor calls for set-up, and what they return here (no kernel runs).
_SETUP_CALLS = {
    "torch.ops.deep_gemm.init": None,                   # DeepGEMM's import-time JIT include paths
    "torch.ops._flashkda_C.get_workspace_size": 0,      # a prefill workspace size (Kimi-K3 KDA)
    "torch.ops.deep_gemm.shutdown": None,               # DeepGEMM's atexit hook
}


# Kernel DSLs whose Python package is a compiled kernel toolchain (CUTLASS CuTe DSL and QuACK on MLIR, TileLang on TVM); model
# files import them at module level to define kernels. Stubbed as a permissive namespace.
_DSL_PACKAGES = ("cutlass", "quack", "tilelang")


@dataclass(frozen=True)
class FakeGpu:
    sm: int
    name: str
    memory_gib: float
    sms: int = 132


class _CompiledOp:
    """A compiled kernel entry point: present (as in the CUDA wheel), never callable here."""

    def __init__(self, name: str):
        self._name = name

    def __call__(self, *args, **kwargs):
        if self._name in _SETUP_CALLS:
            return _SETUP_CALLS[self._name]
        raise RuntimeError(f"{self._name} is a compiled CUDA kernel; the CPU harness cannot run it")

    def __getattr__(self, item):
        if item.startswith("__"):
            raise AttributeError(item)
        return _CompiledOp(f"{self._name}.{item}")


class _OpNamespace:
    def __init__(self, name: str, real=None):
        self._ns, self._real = name, real

    def __getattr__(self, item):
        if item.startswith("__"):
            raise AttributeError(item)
        if self._real is not None and item in CAPABILITY_QUERIES:
            return getattr(self._real, item)
        return _CompiledOp(f"torch.ops.{self._ns}.{item}")


# Dunder names Python, inspect and typing probe on any object: a DSL stub must not pretend to have them.
_PROTOCOL = frozenset(dir(object)) | {
    "__wrapped__", "__signature__", "__func__", "__self__", "__code__", "__annotations__", "__origin__",
    "__args__", "__parameters__", "__get__", "__set_name__", "__len__", "__length_hint__", "__fspath__",
    "__index__", "__int__", "__float__", "__await__", "__enter__", "__exit__", "__path__", "__file__",
    "__spec__", "__loader__", "__all__", "__name__", "__qualname__", "__module__", "__dict__",
    "__dataclass_fields__", "__pydantic_core_schema__", "__get_pydantic_core_schema__", "__objclass__",
    "__isabstractmethod__", "__test__",
}


class _Dsl:
    """Any name inside a stubbed kernel DSL: usable as a decorator, a type, a base class or a value."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, item):
        if item in _PROTOCOL:
            raise AttributeError(item)
        return _Dsl(f"{self._name}.{item}")

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]           # @cute.jit / @cute.kernel
        return _Dsl(f"{self._name}()")

    def __getitem__(self, item):
        return _Dsl(f"{self._name}[]")

    def __mro_entries__(self, bases):
        return (object,)

    def __iter__(self):
        return iter(())

    def _op(self, *other):
        return self

    __or__ = __ror__ = __and__ = __add__ = __radd__ = __sub__ = __mul__ = __rmul__ = __truediv__ = _op
    __floordiv__ = __mod__ = __lshift__ = __rshift__ = __neg__ = __lt__ = __gt__ = __le__ = __ge__ = _op

    def __bool__(self):
        return True


class _DslModule(types.ModuleType):
    def __getattr__(self, item):
        if item.startswith("__"):
            raise AttributeError(item)
        return _Dsl(f"{self.__name__}.{item}")


class _DslFinder:
    """Serves every module of the stubbed kernel DSL packages."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        import importlib.machinery

        if fullname.split(".")[0] in _DSL_PACKAGES:
            return importlib.machinery.ModuleSpec(fullname, cls, is_package=True)
        return None

    @staticmethod
    def create_module(spec):
        mod = _DslModule(spec.name)
        mod.__path__ = []
        return mod

    @staticmethod
    def exec_module(module):
        return None


def install(gpu: FakeGpu, *, flashinfer: bool, cache_root: str) -> None:
    """Install every stub before vLLM is imported."""
    os.environ["VLLM_CACHE_ROOT"] = cache_root
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO")
    os.environ["VLLM_HAS_FLASHINFER_CUBIN"] = "1" if flashinfer else "0"
    if not flashinfer:
        # "not installed": importlib.util.find_spec() answers None for a module mapped to None
        # (the b12x package comes in the FlashInfer wheel: without FlashInfer there is no b12x either)
        for name in ("flashinfer", "flashinfer_cubin", "b12x"):
            sys.modules[name] = None  # type: ignore[assignment]
    sys.meta_path.insert(0, _DslFinder)
    import torch

    _stub_extensions(torch)
    _fake_torch_device(torch, gpu)
    _fake_triton_target(gpu)
    _fake_platform(gpu)
    import vllm.model_executor.models.registry as registry

    registry._run_in_subprocess = lambda fn: fn()   # vLLM forks only to keep CUDA uninitialised


def _stub_extensions(torch) -> None:
    for name in _EXTENSIONS:
        sys.modules[name] = types.ModuleType(name)
    lib = torch.library.Library("_C", "DEF")   # noqa: the library must outlive this call
    _stub_extensions.lib = lib
    for name, fn in CAPABILITY_QUERIES.items():
        lib.define(f"{name}(int cuda_device_capability) -> bool")
        lib.impl(name, fn, "CompositeExplicitAutograd")
    real_c = torch.ops._C
    for ns in _OP_NAMESPACES:
        setattr(torch.ops, ns, _OpNamespace(ns, real_c if ns == "_C" else None))
    import torch.library as tl

    real_register_fake = tl.register_fake

    def register_fake(op, fn=None, /, *args, **kwargs):
        # vLLM registers fake (meta) kernels for its compiled ops at import; those ops are not loaded here
        def deco(f):
            try:
                return real_register_fake(op, f, *args, **kwargs)
            except RuntimeError:
                return f
        return deco(fn) if fn is not None else deco

    tl.register_fake = register_fake
    real_load_library = torch.ops.load_library

    def load_library(path):
        if str(path).endswith(".so") and "deep_gemm" in str(path):
            return None    # vLLM's vendored DeepGEMM extension (needs libcuda); its ops are stubbed above
        return real_load_library(path)

    torch.ops.load_library = load_library


def _fake_torch_device(torch, gpu: FakeGpu) -> None:
    props = types.SimpleNamespace(
        name=gpu.name, major=gpu.sm // 10, minor=gpu.sm % 10, total_memory=int(gpu.memory_gib * (1 << 30)),
        multi_processor_count=gpu.sms, L2_cache_size=50 << 20, gcnArchName="", uuid="GPU-fake",
        shared_memory_per_block_optin=232448 if gpu.sm in (90, 100) else 101376)
    torch.cuda.get_device_capability = lambda device=None: (gpu.sm // 10, gpu.sm % 10)
    torch.cuda.get_device_properties = lambda device=None: props
    torch.cuda.get_device_name = lambda device=None: gpu.name
    torch.cuda.device_count = lambda: 1
    torch.cuda.current_device = lambda: 0
    torch.cuda.Stream = _DeviceObject
    torch.cuda.Event = _DeviceObject


class _DeviceObject:
    """torch.cuda.Stream / Event: a model may create one in its constructor; nothing runs on it here."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, item):
        return lambda *a, **k: None


def meta_build():
    """A context in which the model is built on the meta device: tensors a constructor places on "cuda"
    explicitly (buffers, workspaces) land on meta too. Shapes and dtypes are kept; nothing is allocated."""
    import torch
    from torch.overrides import TorchFunctionMode

    def _meta(dev):
        if isinstance(dev, int) or (isinstance(dev, (str, torch.device)) and str(dev).startswith("cuda")):
            return torch.device("meta")
        return dev

    class CudaToMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if "device" in kwargs:
                kwargs["device"] = _meta(kwargs["device"])
            name = getattr(func, "__name__", "")
            if name == "to" and args and len(args) > 1:
                args = (args[0], _meta(args[1]), *args[2:])
            if name == "cuda":
                return args[0].to("meta")
            return func(*args, **kwargs)

    return CudaToMeta()


def _fake_triton_target(gpu: FakeGpu) -> None:
    try:
        import triton
        from triton.backends.compiler import GPUTarget
    except ImportError:
        return

    from triton.backends import backends

    for backend in backends.values():      # is_active() looks for libcuda; the GPU under test has it
        if backend.driver is not None and "cuda" in backend.driver.__name__.lower():
            backend.driver.is_active = staticmethod(lambda: True)

    class _Driver:
        def get_current_target(self):
            return GPUTarget("cuda", gpu.sm, 32)

        def get_current_device(self):
            return 0

        def get_active_torch_device(self):
            import torch

            return torch.device("cuda", 0)

        def __getattr__(self, item):
            raise AttributeError(item)

    triton.runtime.driver.set_active(_Driver())


def _fake_platform(gpu: FakeGpu) -> None:
    import vllm.platforms as platforms
    from vllm.platforms.cuda import CudaPlatformBase
    from vllm.platforms.interface import DeviceCapability

    class HarnessCudaPlatform(CudaPlatformBase):
        """vLLM's own CUDA platform; only the device queries answer for the GPU under test."""

        @classmethod
        def get_device_capability(cls, device_id: int = 0):
            return DeviceCapability(gpu.sm // 10, gpu.sm % 10)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return gpu.name

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return int(gpu.memory_gib * (1 << 30))

        @classmethod
        def is_fully_connected(cls, physical_device_ids) -> bool:
            return True

        @classmethod
        def num_compute_units(cls, device_id: int = 0) -> int:
            return gpu.sms

    platforms._current_platform = HarnessCudaPlatform()


def check_platform_everywhere() -> list[str]:
    """vLLM modules that hold a current_platform other than the harness's (must be empty)."""
    import vllm.platforms as platforms

    ours = platforms._current_platform
    return sorted(name for name, mod in list(sys.modules.items())
                  if name.startswith("vllm") and mod is not None
                  and getattr(mod, "current_platform", ours) is not ours)
