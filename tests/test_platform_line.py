"""utils.describe_platform: the versions in use and the device, as eval.py's first line and
pytest's header show them. The GPU branches run here against a patched torch.cuda and
torch.version; aiter against small packages put on sys.path."""
import importlib.util
import sys
import types

import pytest
import torch
import triton

import utils

pytestmark = pytest.mark.fast


@pytest.fixture
def aiter_package(tmp_path, monkeypatch):
    """aiter_package(with_mla) puts a package `aiter` (version 0.1.10) first on sys.path,
    in place of any aiter already imported (ROCm's, or tests/simulated_rocm's); every aiter
    module imported meanwhile is forgotten afterwards and the earlier ones come back, so
    that no other test (reference.py's aiter check) sees it."""
    for name in [name for name in sys.modules if name == "aiter" or name.startswith("aiter.")]:
        monkeypatch.delitem(sys.modules, name)

    def make(with_mla: bool):
        package = tmp_path / "aiter"
        package.mkdir()
        (package / "__init__.py").write_text("__version__ = '0.1.10'\n")
        if with_mla:
            (package / "mla.py").write_text("def mla_decode_fwd(*args):\n    pass\n")
        monkeypatch.syspath_prepend(str(tmp_path))
    yield make
    for name in [name for name in sys.modules if name == "aiter" or name.startswith("aiter.")]:
        del sys.modules[name]


@pytest.fixture
def gpu(monkeypatch):
    """gpu(properties, count, hip=None, cuda=None): torch as a GPU build seeing `count` devices."""
    def make(properties, count, hip=None, cuda=None):
        monkeypatch.setattr(torch.version, "hip", hip)
        monkeypatch.setattr(torch.version, "cuda", cuda)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: properties)
    return make


def test_on_a_cpu_machine(monkeypatch):
    # torch as a CPU build on a machine without a GPU, whatever this machine is.
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    line = utils.describe_platform()
    assert line.startswith(f"torch {torch.__version__} (CPU build), triton {triton.__version__}, "
                           f"aiter ")
    assert line.endswith("; device CPU (no GPU)")


def test_without_aiter(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "aiter" else find_spec(name, *args))
    assert ", aiter not installed; device " in utils.describe_platform()


def test_rocm_build_on_an_mi355x(gpu, aiter_package):
    gpu(types.SimpleNamespace(name="AMD Instinct MI355X", gcnArchName="gfx950:sramecc+:xnack-",
                              major=9, minor=5), count=8, hip="7.1.25424")
    aiter_package(with_mla=True)
    line = utils.describe_platform()
    assert line == (f"torch {torch.__version__} (HIP 7.1.25424), triton {triton.__version__}, "
                    f"aiter 0.1.10; device AMD Instinct MI355X (gfx950), the first of 8")


def test_cuda_build_on_an_h200(gpu):
    gpu(types.SimpleNamespace(name="NVIDIA H200", major=9, minor=0), count=1, cuda="13.0")
    assert utils.describe_platform().endswith("; device NVIDIA H200 (sm_90)")
    assert f"torch {torch.__version__} (CUDA 13.0), " in utils.describe_platform()


def test_an_aiter_without_mla_is_named_unusable(aiter_package):
    # PyPI's unrelated `aiter` has no aiter.mla; reference.py does not use it either.
    aiter_package(with_mla=False)
    assert ", aiter unusable (ModuleNotFoundError: No module named 'aiter.mla'); " in (
        utils.describe_platform())


def test_pytest_header_names_the_versions(pytestconfig):
    headers = pytestconfig.hook.pytest_report_header(config=pytestconfig,
                                                     start_path=pytestconfig.rootpath)
    assert f"versions and device: {utils.describe_platform()}" in headers
