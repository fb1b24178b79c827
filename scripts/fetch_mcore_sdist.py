"""Download a megatron-core source distribution into .mcore/ for the conformance suite (idempotent).

megatron-core releases after 0.16 publish wheels for Python >= 3.12 only; their source imports on 3.11 (with
torch, numpy, packaging and triton installed), so the suite puts the unpacked tree on PYTHONPATH.
Usage: python scripts/fetch_mcore_sdist.py [VERSION ...]   (default 0.19.2)
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / ".mcore"


def fetch(version: str) -> Path:
    target = ROOT / f"megatron_core-{version}"
    if (target / "megatron" / "core").is_dir():
        return target
    ROOT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary=:all:",
                        "--ignore-requires-python", f"megatron-core=={version}", "-d", tmp], check=True)
        (archive,) = Path(tmp).glob("*.tar.gz")
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
            tar.extractall(ROOT, members=members, filter="data") if sys.version_info >= (3, 12) else \
                tar.extractall(ROOT, members=members)
    return target


if __name__ == "__main__":
    for version in sys.argv[1:] or ["0.19.2"]:
        print(fetch(version))
