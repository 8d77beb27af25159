"""da3go.ray on a real local Ray cluster (a head and a worker node on loopback, started here).

A job over a few hundred tiny images writes every output exactly once, with the library's values;
killing a predictor actor's process in the middle of a job still completes it, with the same
outputs; a rerun skips the finished images and runs only what is missing.
Skips (saying why) where Ray is not installed."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'ray[data]'): the Ray tests are skipped")

import da3go  # noqa: E402
import da3go.ray as dr  # noqa: E402

N_IMAGES = 240


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_bin() -> str:
    exe = Path(sys.executable).parent / "ray"
    return str(exe) if exe.exists() else shutil.which("ray") or "ray"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head node and one worker node on 127.0.0.1, one CPU each, torn down afterwards."""
    tmp = tmp_path_factory.mktemp("ray")
    port = _free_port()
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    common = ["--disable-usage-stats", "--num-cpus=1"]
    subprocess.run([_ray_bin(), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                    "--include-dashboard=false", f"--temp-dir={tmp}", *common], check=True, env=env, timeout=120,
                   capture_output=True)
    try:
        subprocess.run([_ray_bin(), "start", f"--address=127.0.0.1:{port}", "--node-ip-address=127.0.0.1", *common],
                       check=True, env=env, timeout=120, capture_output=True)
        ray.init(address=f"127.0.0.1:{port}", logging_level="ERROR", log_to_driver=False)
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        yield f"127.0.0.1:{port}"
    finally:
        try:
            ray.shutdown()
        finally:
            subprocess.run([_ray_bin(), "stop", "--force"], env=env, timeout=120, capture_output=True)


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> list[str]:
    """N_IMAGES small PNG images of two sizes, written once."""
    from PIL import Image

    d = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(7)
    paths = []
    for i in range(N_IMAGES):
        w, h = (64, 48) if i % 3 else (48, 64)
        arr = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        p = d / f"img{i:04d}.png"
        Image.fromarray(arr).save(p)
        paths.append(str(p))
    return paths


@pytest.fixture(scope="module")
def tiny_model(ref) -> str:
    """The tiny DA3 model goref converted."""
    return str(ref.gguf)


def _job(model: str, paths: list[str], out: Path, concurrency: int = 2):
    return dr.depth_job(paths, model, str(out), concurrency=concurrency, threads=1, batch_size=8, blocks=24, device="cpu")


def _outputs(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*_depth.npy"))}


def test_job_writes_every_output_once(cluster, tiny_model, images, tmp_path):
    rows = _job(tiny_model, images, tmp_path / "out")
    assert len(rows) == len(images), "one row per image"
    files = [r["file"] for r in rows]
    assert len(set(files)) == len(images), "every image its own file, written once"
    got = _outputs(tmp_path / "out")
    assert len(got) == len(images)
    assert not list((tmp_path / "out").glob(".*.tmp")), "no temporary file left"
    # The values are the library's: depth of a few images in this process.
    with da3go.Model(tiny_model, device="cpu", threads=1) as m:
        for p in images[:5]:
            want = m.depth(p).depth
            have = np.load(dr.output_path(str(tmp_path / "out"), p))
            np.testing.assert_array_equal(have, want)


class DyingPredictor(dr.DepthPredictor):
    """A predictor whose actor process dies (SIGKILL to itself) at its third batch, once per job: the
    first actor to get there makes the marker file and is killed; the others carry on."""

    def __init__(self, marker: str, **kwargs):
        super().__init__(**kwargs)
        self.marker, self.batches = marker, 0

    def __call__(self, batch):
        self.batches += 1
        if self.batches == 3:
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        return super().__call__(batch)


def test_killed_actor(cluster, tiny_model, images, tmp_path):
    """An actor's process killed in the middle of a job: the job still writes every output, equal to an
    undisturbed run's."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this module
    ref, out, marker = tmp_path / "ref", tmp_path / "out", tmp_path / "killed"

    class Predictor(DyingPredictor):
        def __init__(self, **kwargs):
            super().__init__(str(marker), **kwargs)

    _job(tiny_model, images, ref)
    rows = dr.depth_job(images, tiny_model, str(out), concurrency=2, threads=1, batch_size=8, blocks=24,
                        device="cpu", predictor=Predictor)
    assert marker.exists(), "a predictor actor was killed mid-job"
    assert len(rows) >= len(images) - 8 * 3, "the job went on after the kill"
    assert _outputs(out) == _outputs(ref), "the same outputs as an undisturbed run, every image written"
    assert not list(out.glob(".*.tmp")), "no temporary file left"


def test_rerun_skips_finished(cluster, tiny_model, images, tmp_path):
    out = tmp_path / "out"
    _job(tiny_model, images, out)
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*_depth.npy")}
    (out / dr.output_path(str(out), images[3]).name).unlink()
    rows = _job(tiny_model, images, out)
    assert [r["path"] for r in rows] == [images[3]], "only the missing image runs again"
    after = {p.name: p.stat().st_mtime_ns for p in out.glob("*_depth.npy")}
    for name, t in before.items():
        if name != dr.output_path(str(out), images[3]).name:
            assert after[name] == t, f"{name} was not rewritten"


def test_scenes_grouped(cluster, tiny_model):
    """ScenePredictor runs each group of a groupby as one multi-view scene (views in path order): the
    same depth and cameras as Model.scene on those images."""
    base = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "da3-tiny"
    rows = [{"scene": "a", "path": str(base / "two" / "images" / f"view{i}.png")} for i in (1, 0)]
    rows += [{"scene": "b", "path": str(base / "four" / "images" / f"view{i}.png")} for i in range(4)]
    ds = ray.data.from_items(rows).groupby("scene").map_groups(
        dr.ScenePredictor, fn_constructor_kwargs={"model": tiny_model, "device": "cpu", "threads": 1},
        concurrency=1, num_cpus=1, batch_format="numpy")
    out = ds.take_all()
    assert len(out) == len(rows)
    with da3go.Model(tiny_model, device="cpu", threads=1) as m:
        for scene in ("a", "b"):
            got = [r for r in out if r["scene"] == scene]
            paths = sorted(r["path"] for r in rows if r["scene"] == scene)
            assert [r["path"] for r in got] == paths
            for g, w in zip(got, m.scene(paths)):
                np.testing.assert_array_equal(g["depth"], w.depth)
                np.testing.assert_array_equal(g["extrinsics"], np.asarray(w.camera["extrinsics"]))


def _example(address: str, *args: str) -> str:
    """Runs python/examples/ray_depth.py against the cluster; returns its stderr."""
    script = Path(__file__).resolve().parents[1] / "examples" / "ray_depth.py"
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    p = subprocess.run([sys.executable, str(script), *args, "--address", address, "--device", "cpu"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stderr


def test_example_folder_and_scenes(cluster, tiny_model, images, tmp_path):
    """The example writes one .npy per image of a folder (the library's depth), one .npz per view
    of each sub-folder scene (Model.scene's depth and cameras), and a rerun writes nothing."""
    folder = tmp_path / "photos"
    (folder / "sub").mkdir(parents=True)
    picked = images[:10]
    for i, p in enumerate(picked):
        shutil.copy(p, folder / ("sub" if i % 2 else "") / Path(p).name)
    out = tmp_path / "out"
    err = _example(cluster, str(folder), str(out), "--model", tiny_model, "--concurrency", "2")
    assert "10 of 10 images written" in err
    with da3go.Model(tiny_model, device="cpu", threads=1) as m:
        for p in sorted(folder.rglob("*.png")):
            got = np.load(dr.output_path(str(out), str(p)))
            np.testing.assert_array_equal(got, m.depth(str(p)).depth)
    assert "0 of 10 images written" in _example(cluster, str(folder), str(out), "--model", tiny_model)

    base = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "da3-tiny"
    scenes = tmp_path / "scenes"
    for name, n in (("two", 2), ("four", 4)):
        (scenes / name).mkdir(parents=True)
        for i in range(n):
            shutil.copy(base / name / "images" / f"view{i}.png", scenes / name / f"view{i}.png")
    sout = tmp_path / "sout"
    assert "6 of 6 images written" in _example(cluster, str(scenes), str(sout), "--model", tiny_model, "--scenes")
    with da3go.Model(tiny_model, device="cpu", threads=1) as m:
        for name in ("two", "four"):
            views = sorted(str(p) for p in (scenes / name).glob("*.png"))
            for path, want in zip(views, m.scene(views)):
                got = np.load(dr.output_path(str(sout), path).with_suffix(".npz"))
                np.testing.assert_array_equal(got["depth"], want.depth)
                np.testing.assert_array_equal(got["extrinsics"], np.asarray(want.camera["extrinsics"]))
    assert "0 of 6 images written" in _example(cluster, str(scenes), str(sout), "--model", tiny_model, "--scenes")
