"""Small helpers importable by the TUI tests (pytest puts this folder on sys.path)."""

import socket


def free_port_for_test() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def no_gpu_probe_result():
    """The probe as it answers without an NVIDIA driver (conftest's, importable by module name: a bare
    `from conftest import` picks another folder's conftest when several test folders run together)."""
    from advisor.probe.build import build_result
    from advisor.probe.nvml_source import RawSnapshot

    return build_result(RawSnapshot(status="no-driver", message="no NVIDIA driver found (test)",
                                    driver_version=None, cuda_driver_version=None, nvml_version=None,
                                    devices=(), pairs=()))
