"""The da3go package against the Go library, on the tiny DA3 fixture."""
from __future__ import annotations

import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import da3go
from conftest import RES, VIEW0, VIEW1, Ref


def variants() -> list:
    """VIEW0, its negative and its left-right mirror, as goref builds them."""
    base = np.asarray(Image.open(VIEW0).convert("RGB"))
    return [base, 255 - base, np.ascontiguousarray(base[:, ::-1])]


def assert_same(r: da3go.Result, ref: Ref, name: str) -> None:
    """r equals the Go library's result name bit for bit."""
    assert np.array_equal(r.depth, ref[f"{name}_depth"]), f"{name}: depth"
    assert r.depth.dtype == np.float32
    assert np.array_equal(r.conf, ref[f"{name}_conf"]), f"{name}: conf"
    assert r.camera is not None
    assert np.array_equal(r.camera["extrinsics"], ref[f"{name}_extrinsics"]), f"{name}: extrinsics"
    assert np.array_equal(r.camera["intrinsics_original"], ref[f"{name}_intrinsics"]), f"{name}: intrinsics"


def test_library_bundled() -> None:
    path = da3go.library_path()
    assert path.name == "libda3go.so"
    assert path.is_file()


def test_info(model: da3go.Model) -> None:
    info = model.info
    assert info["name"] == "da3-tiny"
    assert info["abi_version"] == da3go.ABI_VERSION
    assert info["camera"] is True and info["confidence"] is True


def test_depth_path_equals_go(model: da3go.Model, ref: Ref) -> None:
    r = model.depth(VIEW0, process_res=RES)
    assert_same(r, ref, "depth")
    assert r.depth.shape == (33, 50)
    assert r.unit == "relative"
    assert r.sky is None
    assert r.camera["intrinsics"].shape == (3, 3)


@pytest.mark.parametrize("kind", ["numpy", "pil", "str"])
def test_depth_inputs_equal_go(model: da3go.Model, ref: Ref, kind: str) -> None:
    image = {"numpy": np.asarray(Image.open(VIEW0).convert("RGB")), "pil": Image.open(VIEW0),
             "str": str(VIEW0)}[kind]
    assert_same(model.depth(image, process_res=RES), ref, "depth")


def test_processed_size(model: da3go.Model) -> None:
    r = model.depth(VIEW0, process_res=RES, processed_size=True)
    assert r.depth.shape == (r.processed_size[1], r.processed_size[0])
    assert r.processed_size[0] % 14 == 0 and r.processed_size[1] % 14 == 0


def test_depth_batch_equals_go(model: da3go.Model, ref: Ref) -> None:
    results = model.depth_batch(variants(), process_res=RES)
    assert len(results) == 3
    for i, r in enumerate(results):
        assert_same(r, ref, f"batch{i}")
    assert not np.array_equal(results[0].depth, results[1].depth)


def test_depth_batch_groups_sizes(model: da3go.Model) -> None:
    base, neg, _ = variants()
    other = np.asarray(Image.open(VIEW1).convert("RGB"))
    results = model.depth_batch([base, other, neg], process_res=RES)
    assert [r.depth.shape for r in results] == [base.shape[:2], other.shape[:2], neg.shape[:2]]
    for image, r in zip([base, other, neg], results):
        alone = model.depth(image, process_res=RES).depth
        np.testing.assert_allclose(r.depth, alone, rtol=1e-5, atol=1e-5 * float(np.abs(alone).max()))


def test_scene_equals_go(model: da3go.Model, ref: Ref) -> None:
    arrays = [np.asarray(Image.open(p).convert("RGB")) for p in (VIEW0, VIEW1)]
    for images in ([VIEW0, VIEW1], arrays, [VIEW0, arrays[1]]):
        views = model.scene(images, process_res=RES)
        assert len(views) == 2
        for i, r in enumerate(views):
            assert_same(r, ref, f"scene{i}")


def test_scenes_one_call(model: da3go.Model, ref: Ref) -> None:
    first, second = model.scenes([[VIEW0, VIEW1], [VIEW1]], process_res=RES)
    for i, r in enumerate(first):
        assert_same(r, ref, f"scene{i}")
    assert len(second) == 1
    assert np.array_equal(second[0].depth, model.scene([VIEW1], process_res=RES)[0].depth)


def test_points(model: da3go.Model) -> None:
    xyz, rgb = model.points([VIEW0, VIEW1], process_res=RES)
    assert xyz.ndim == 2 and xyz.shape[1] == 3 and xyz.shape[0] > 0
    assert rgb.shape == xyz.shape and rgb.dtype == np.uint8
    assert np.isfinite(xyz).all()


@pytest.mark.parametrize("fmt", ["glb", "ply", "npz", "mesh_ply"])
def test_export(model: da3go.Model, tmp_path: Path, fmt: str) -> None:
    out = model.export([VIEW0, np.asarray(Image.open(VIEW1).convert("RGB"))], fmt, tmp_path / f"scene.{fmt}",
                       process_res=RES)
    data = out.read_bytes()
    assert len(data) > 100
    if fmt == "glb":
        assert data[:4] == b"glTF"
    elif fmt == "ply":
        assert data.startswith(b"ply\n")
    elif fmt == "mesh_ply":
        assert data.startswith(b"ply\n") and b"element face" in data[:400]
    else:
        with zipfile.ZipFile(out) as z:
            assert any(n.startswith("depth") for n in z.namelist()), z.namelist()
        npz = np.load(out)
        assert npz["depth"].shape[0] == 2


def test_errors(model: da3go.Model, tmp_path: Path) -> None:
    with pytest.raises(da3go.Error, match="no-such.png"):
        model.depth(tmp_path / "no-such.png")
    with pytest.raises(da3go.Error, match="HxWx3 uint8"):
        model.depth(np.zeros((4, 4), np.uint8))
    with pytest.raises(da3go.Error, match="HxWx3 uint8"):
        model.depth(np.zeros((4, 4, 3), np.float32))
    with pytest.raises(da3go.Error, match="not an image"):
        model.depth(42)
    with pytest.raises(da3go.Error, match="process_res -1"):
        model.depth(VIEW0, process_res=-1)
    with pytest.raises(da3go.Error, match="unknown export format"):
        model.export([VIEW0], "obj", tmp_path / "x.obj")
    with pytest.raises(da3go.Error, match="no images"):
        model.depth_batch([])
    with pytest.raises(da3go.Error, match="extrinsics"):
        model.scene([VIEW0, VIEW1], extrinsics=np.zeros((2, 3, 4)))
    with pytest.raises(da3go.Error):
        da3go.Model(tmp_path / "missing.gguf")
    assert issubclass(da3go.Error, RuntimeError)


#: The OPENCV_FISHEYE lens of goref's fisheye.png (64x48), COLMAP's order.
FISHEYE = [30, 30, 32.2, 23.7, 0.05, -0.01, 0.002, -0.0003]


def _colmap_cameras(path: Path) -> list:
    """(model id, width, height, params) of a COLMAP cameras.bin."""
    data = path.read_bytes()
    n, off, out = int(np.frombuffer(data, "<u8", 1, 0)[0]), 8, []
    counts = {0: 3, 1: 4, 5: 8}  # SIMPLE_PINHOLE, PINHOLE, OPENCV_FISHEYE
    for _ in range(n):
        _, model_id = np.frombuffer(data, "<i4", 2, off)
        w, h = np.frombuffer(data, "<u8", 2, off + 8)
        k = counts[int(model_id)]
        out.append((int(model_id), int(w), int(h), list(np.frombuffer(data, "<f8", k, off + 24))))
        off += 24 + 8 * k
    return out


def test_camera_model_equals_go(model: da3go.Model, ref: Ref, tmp_path: Path) -> None:
    """camera_model: the maps at the input size are the Go library's (undistort, run, map back) bit
    for bit, NaN only on the fisheye's rim; the camera has the lens's pinhole part; keep_undistorted
    gives the pinhole view's maps; the COLMAP export holds the OPENCV_FISHEYE camera."""
    img = ref.folder / "fisheye.png"
    lens = dict(process_res=RES, camera_model="fisheye", camera_params=FISHEYE)
    r = model.depth(img, **lens)
    assert r.depth.shape == (48, 64)
    np.testing.assert_array_equal(r.depth, ref["fisheye_depth"])  # NaN where Go has NaN
    np.testing.assert_array_equal(r.conf, ref["fisheye_conf"])
    nan = np.isnan(r.depth)
    assert 0 < nan.sum() < nan.size // 2
    assert not nan[12:36, 16:48].any(), "NaN only on the rim"
    assert np.array_equal(r.camera["intrinsics_original"], [[30, 0, 32.2], [0, 30, 23.7], [0, 0, 1]])
    # The same from a numpy array (da3go_run_scenes).
    arr = np.asarray(Image.open(img).convert("RGB"))
    np.testing.assert_array_equal(model.depth(arr, **lens).depth, ref["fisheye_depth"])

    kept = model.depth(img, keep_undistorted=True, **lens)
    assert np.array_equal(kept.depth, ref["fisheye_pinhole_depth"])
    assert not np.isnan(kept.depth).any()

    model.export([img, img], "colmap", tmp_path / "sparse", **lens)
    cams = _colmap_cameras(tmp_path / "sparse" / "cameras.bin")
    assert [c[:3] for c in cams] == [(5, 64, 48), (5, 64, 48)]
    assert np.array_equal(cams[0][3], FISHEYE)
    model.export([img], "colmap", tmp_path / "kept", keep_undistorted=True, **lens)
    assert _colmap_cameras(tmp_path / "kept" / "cameras.bin")[0][0] in (0, 1)

    with pytest.raises(da3go.Error, match="takes 8 parameters, got 3"):
        model.depth(img, process_res=RES, camera_model="opencv", camera_params=[1, 2, 3])
    with pytest.raises(da3go.Error, match="unknown or unsupported camera model"):
        model.depth(img, process_res=RES, camera_model="fov", camera_params=[1, 2, 3, 4, 5])
    with pytest.raises(da3go.Error, match="camera_model needs camera_params"):
        model.depth(img, process_res=RES, camera_model="fisheye")
    with pytest.raises(da3go.Error, match="camera_params needs camera_model"):
        model.depth(img, process_res=RES, camera_params=FISHEYE)
    with pytest.raises(da3go.Error, match="export colmap_tracks with camera_model"):
        model.export([img], "colmap_tracks", tmp_path / "tracks", **lens)


def test_context_manager(ref: Ref) -> None:
    with da3go.Model(ref.gguf, device="cpu", threads=1) as m:
        assert not m.closed
        assert m.depth(VIEW0, process_res=RES).depth.shape == (33, 50)
    assert m.closed
    with pytest.raises(da3go.Error, match="closed"):
        m.depth(VIEW0)
    m.close()  # a second close does nothing


def test_gil_released(ref: Ref) -> None:
    """A thread's inference does not stop the main thread: with the GIL held for the
    call, the main loop would stall for the whole call."""
    image = np.random.default_rng(0).integers(0, 256, (700, 700, 3), dtype=np.uint8)
    with da3go.Model(ref.gguf, device="cpu", threads=1) as m:
        m.depth(image, process_res=280)  # warm up
        spans = []

        def work() -> None:
            for _ in range(3):
                t = time.perf_counter()
                m.depth(image, process_res=504)
                spans.append(time.perf_counter() - t)

        worker = threading.Thread(target=work)
        counter, gap, last = 0, 0.0, time.perf_counter()
        worker.start()
        while worker.is_alive():
            counter += 1
            now = time.perf_counter()
            gap, last = max(gap, now - last), now
        worker.join()
    call = min(spans)
    assert call > 0.05, f"a call took {call:.3f} s: too short to tell"
    assert counter > 1000
    assert gap < 0.5 * call, f"the main thread stalled {gap:.3f} s during calls of {call:.3f} s"


def test_published_name_from_cache(ref: Ref, tmp_path: Path) -> None:
    """A published name loads the verified copy in cache_dir; with download=False a
    name missing from the cache is an error naming the file and the folder."""
    import json
    import shutil

    pub = json.loads((ref.folder / "published.json").read_text())
    name, file, sha = pub["name"], pub["file"], pub["sha256"]
    cache = tmp_path / "cache"
    cache.mkdir()
    # The tiny model stands in for the published file, with the marker of a verified download.
    shutil.copy(ref.gguf, cache / file)
    (cache / (file + ".sha256")).write_text(f"{sha}  {file}\n")
    with da3go.Model(name, cache_dir=cache, download=False, device="cpu", threads=1) as m, \
            da3go.Model(ref.gguf, device="cpu", threads=1) as direct:
        assert np.array_equal(m.depth(VIEW0, process_res=RES).depth, direct.depth(VIEW0, process_res=RES).depth)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(da3go.Error, match=f"{file}.*not in the cache {empty}.*downloads are off"):
        da3go.Model(name, cache_dir=empty, download=False)
    with pytest.raises(da3go.Error, match="did you mean da3-small"):
        da3go.Model("da3-smal", cache_dir=empty, download=False)


def test_precision(ref: Ref) -> None:
    """precision reaches the kernels: bf16 changes the last bits of f32's depth and
    stays close to it (skipped on CPUs without AVX512_BF16); a bad one is refused."""
    with pytest.raises(da3go.Error, match='precision "f16"'):
        da3go.Model(ref.gguf, precision="f16")
    with pytest.raises(da3go.Error, match="narrow"):
        da3go.Model(ref.gguf, narrow_convs=True)
    with da3go.Model(ref.gguf, device="cpu", threads=1, narrow_convs=False):
        pass  # f32 convolutions asked for: valid in every precision
    try:
        bf16 = da3go.Model(ref.gguf, device="cpu", threads=1, precision="bf16")
    except da3go.Error as e:
        pytest.skip(f"bf16 does not run on this CPU: {e}")
    with bf16, da3go.Model(ref.gguf, device="cpu", threads=1) as f32:
        a = f32.depth(VIEW0, process_res=RES).depth
        b = bf16.depth(VIEW0, process_res=RES).depth
    assert not np.array_equal(a, b)
    assert np.corrcoef(a.ravel(), b.ravel())[0, 1] > 0.999
