"""Fixtures of the da3go tests: the tiny DA3 model and what the Go library
computes on it (python/tests/goref), at process_res 56 on one CPU thread.

DA3GO_REF names a folder goref wrote already (make test-python does so);
otherwise goref runs here with `go run` from the repository."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, Iterator

import numpy as np
import pytest

import da3go

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "da3-tiny"
VIEW0 = FIXTURE / "two" / "images" / "view0.png"
VIEW1 = FIXTURE / "two" / "images" / "view1.png"
RES = 56


@pytest.fixture(scope="session")
def ref_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = os.environ.get("DA3GO_REF")
    if env:
        return Path(env)
    go = shutil.which("go")
    if go is None:
        pytest.fail("the Go reference needs DA3GO_REF or a Go toolchain (go run ./python/tests/goref)")
    out = tmp_path_factory.mktemp("goref")
    subprocess.run([go, "run", "./python/tests/goref", "-o", str(out)], cwd=REPO, check=True)
    return out


class Ref:
    """The Go library's outputs, by name: ref["depth_depth"] is depth_depth.npy."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._cache: Dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._cache:
            self._cache[name] = np.load(self.folder / f"{name}.npy")
        return self._cache[name]

    @property
    def gguf(self) -> Path:
        return self.folder / "da3-tiny.gguf"


@pytest.fixture(scope="session")
def ref(ref_dir: Path) -> Ref:
    return Ref(ref_dir)


@pytest.fixture(scope="session")
def model(ref: Ref) -> Iterator[da3go.Model]:
    with da3go.Model(ref.gguf, device="cpu", threads=1) as m:
        yield m
