"""``scripts/setup.sh`` installs torch 2.13.0's CPU build everywhere (``scripts/install_torch.py``):
PyTorch's CPU index as an extra index when it answers (``RCLL_TORCH_INDEX_URL``), and a plan
with CUDA libraries refused before anything is downloaded."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("install_torch", ROOT / "scripts" / "install_torch.py")
install_torch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(install_torch)


def _item(name: str, version: str) -> dict:
    return {"metadata": {"name": name, "version": version}}


def test_setup_installs_torch_only_through_the_script():
    text = (ROOT / "scripts" / "setup.sh").read_text()
    assert "scripts/install_torch.py" in text and "RCLL_TORCH_INDEX_URL" in text
    assert [ln for ln in text.splitlines() if "pip install" in ln and "torch" in ln] == []


def test_the_cpu_index_is_an_extra_index_only_when_it_answers():
    seen = []
    probe = lambda url: seen.append(url) or True  # noqa: E731
    assert install_torch.index_args({}, probe) == ["--extra-index-url", install_torch.CPU_INDEX]
    assert install_torch.index_args({"RCLL_TORCH_INDEX_URL": "http://mirror/cpu"}, probe) \
        == ["--extra-index-url", "http://mirror/cpu"]
    assert install_torch.index_args({}, lambda url: False) == []
    assert install_torch.index_args({"RCLL_TORCH_INDEX_URL": ""}, probe) == []
    assert seen == [install_torch.CPU_INDEX, "http://mirror/cpu"]


def test_a_cuda_plan_is_named():
    pypi_linux = {"install": [_item("torch", "2.13.0"), _item("nvidia-cublas-cu12", "12.8.4.1"),
                              _item("triton", "3.5.0"), _item("filelock", "3.20.0")]}
    assert install_torch.cuda_packages(pypi_linux) == ["nvidia-cublas-cu12==12.8.4.1",
                                                       "triton==3.5.0"]
    assert install_torch.cuda_packages({"install": [_item("torch", "2.13.0+cu128")]}) \
        == ["torch==2.13.0+cu128"]
    assert install_torch.cuda_packages({"install": [_item("torch", "2.13.0+cpu"),
                                                    _item("sympy", "1.14.0")]}) == []


def test_this_machines_pip_plans_the_cpu_build():
    """pip's configuration here (a local wheel folder) alone: the plan is 2.13.0+cpu."""
    env = {**os.environ, "RCLL_TORCH_INDEX_URL": ""}
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "install_torch.py"),
                          "--dry-run"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "torch 2.13.0+cpu" in out.stdout
