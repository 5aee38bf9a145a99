"""Install torch 2.13.0, the CPU build, into the running interpreter (``scripts/setup.sh``).

- Already installed (2.13.0 without CUDA): nothing to do.
- ``RCLL_TORCH_INDEX_URL`` (default :data:`CPU_INDEX`; ``""`` = none): added to pip as an
  *extra* index when it answers within a few seconds, so pip's own configuration (a local
  wheel folder, a mirror) still counts; PyTorch's CPU wheels carry the local version
  ``+cpu``, which sorts above PyPI's plain ``2.13.0`` (PEP 440), so pip takes them.
- Before anything is downloaded, ``pip install --dry-run --report`` says what pip would
  install; a plan with CUDA libraries (``nvidia-*`` packages, the dependencies of PyPI's
  Linux build) is refused with exit status 1 and a message naming ``RCLL_TORCH_INDEX_URL``.

Run as ``python scripts/install_torch.py``; ``--dry-run`` prints the plan and installs nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

SPEC = "torch==2.13.0"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def installed_cpu_torch() -> bool:
    """Whether this interpreter already has torch 2.13.0 built without CUDA."""
    code = ("import torch, sys; v = torch.__version__.split('+')[0]; "
            "sys.exit(0 if v == '2.13.0' and torch.version.cuda is None else 1)")
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def reachable(url: str, timeout_s: float = 5.0) -> bool:
    """Whether ``url``'s torch page answers (any HTTP status below 400) within ``timeout_s``."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/torch/", timeout=timeout_s) as resp:
            return resp.status < 400
    except (OSError, ValueError):
        return False


def index_args(environ: dict, probe=reachable) -> list[str]:
    """pip's extra-index arguments: ``RCLL_TORCH_INDEX_URL`` (default :data:`CPU_INDEX`) when
    it is not empty and ``probe`` says it answers; else none."""
    url = environ.get("RCLL_TORCH_INDEX_URL", CPU_INDEX).strip()
    return ["--extra-index-url", url] if url and probe(url) else []


def cuda_packages(report: dict) -> list[str]:
    """The CUDA packages a ``pip install --report`` plan would install (``nvidia-*``,
    ``triton``, or a torch whose version says ``+cu…``)."""
    out = []
    for item in report.get("install", []):
        meta = item.get("metadata", {})
        name, version = meta.get("name", "").lower(), meta.get("version", "")
        if name.startswith("nvidia-") or name == "triton" or (
                name == "torch" and "+cu" in version):
            out.append(f"{name}=={version}")
    return out


def plan(args: list[str]) -> dict:
    """What pip would install for :data:`SPEC` with ``args`` (its JSON report; nothing is
    installed, only metadata fetched)."""
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run",
                          "--ignore-installed", "--report", "-", *args, SPEC],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main(argv: list[str]) -> int:
    dry = "--dry-run" in argv
    if installed_cpu_torch() and not dry:
        return 0
    args = index_args(dict(os.environ))
    report = plan(args)
    torch = [i["metadata"]["version"] for i in report.get("install", [])
             if i["metadata"]["name"].lower() == "torch"]
    cuda = cuda_packages(report)
    print(f"setup: torch {torch[0] if torch else '?'}"
          + (f" (extra index {args[1]})" if args else " (pip's own configuration)"))
    if cuda:
        print(f"setup: refusing a CUDA build of torch ({', '.join(cuda[:3])}…): set "
              f"RCLL_TORCH_INDEX_URL to an index of CPU wheels ({CPU_INDEX} or a mirror)",
              file=sys.stderr)
        return 1
    if dry:
        return 0
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *args, SPEC],
                   check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
