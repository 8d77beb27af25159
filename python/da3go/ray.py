"""Depth Anything over Ray Data: da3go models as actors of ``Dataset.map_batches``.

A batch job over many images (or many scenes) runs as a Ray Data pipeline: the model is loaded once
per actor, batches of images stream through it with Ray's backpressure, and a failed actor's work is
retried on another. Outputs are written one file per image, keyed by its path, so a rerun skips what
is done (``pending``) and a retried batch rewrites the same files (written to a temporary name and
renamed, so a file is either whole or absent).

    import ray, da3go.ray as dr
    ds = ray.data.from_items([{"path": p} for p in paths])
    ds = dr.pending(ds, out_dir)                               # skip finished images
    ds = ds.map_batches(dr.DepthPredictor, fn_constructor_kwargs={"model": "da3-small.gguf"},
                        concurrency=2, num_cpus=1, batch_size=8)
    ds = ds.map_batches(dr.write_npy, fn_kwargs={"out_dir": out_dir}, num_cpus=0)  # the actors hold the CPUs
    ds.materialize()

or all of that, resumed after a failure (an actor or a node lost), in one call:

    dr.depth_job(paths, "da3-small.gguf", out_dir, concurrency=2)
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

import numpy as np

from . import Model


def _threads(threads: Optional[int]) -> int:
    """Threads of an actor: as given, else the CPUs Ray assigned it, else all cores."""
    if threads:
        return threads
    try:
        import ray

        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 0)
        if cpus >= 1:
            return int(cpus)
    except Exception:  # outside Ray
        pass
    return os.cpu_count() or 1


def _images(batch: Dict[str, Any], image_column: str, path_column: str) -> List[Any]:
    if image_column in batch:
        return [np.ascontiguousarray(im, dtype=np.uint8) for im in batch[image_column]]
    return [str(p) for p in batch[path_column]]


class DepthPredictor:
    """A callable class for ``Dataset.map_batches``: each image of a batch is its own scene.

    Batches hold an ``image`` column (HxWx3 uint8 arrays) or a ``path`` column (image files, decoded by
    da3-go's decoder). The output batch keeps ``path`` (when present) and adds ``depth`` (float32 HxW),
    ``conf`` (when the model has confidence), ``unit`` and, for models with a camera head,
    ``extrinsics`` (3x4) and ``intrinsics`` (3x3). Same-size images run through da3-go's batched graph
    in one call.
    """

    def __init__(self, model: str, metric_model: Optional[str] = None, device: str = "auto",
                 threads: Optional[int] = None, image_column: str = "image", path_column: str = "path",
                 precision: str = "f32"):
        self.model = Model(model, metric_path=metric_model, device=device, threads=_threads(threads),
                           precision=precision)
        self.image_column, self.path_column = image_column, path_column

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, Any]:
        images = _images(batch, self.image_column, self.path_column)
        arrays = [im if isinstance(im, np.ndarray) else None for im in images]
        if all(a is not None for a in arrays):
            results = self.model.depth_batch(arrays)
        else:
            results = [self.model.depth(im) for im in images]
        return _columns(batch, self.path_column, results)


class ScenePredictor:
    """A callable class for ``Dataset.groupby(scene_column).map_groups`` (with
    ``batch_format="numpy"``): each group is one multi-view scene (views of one place), run as one
    ``Model.scene`` with its views in path order; the cameras share the scene's frame."""

    def __init__(self, model: str, metric_model: Optional[str] = None, device: str = "auto",
                 threads: Optional[int] = None, image_column: str = "image", path_column: str = "path",
                 precision: str = "f32"):
        self.model = Model(model, metric_path=metric_model, device=device, threads=_threads(threads),
                           precision=precision)
        self.image_column, self.path_column = image_column, path_column

    def __call__(self, group: Dict[str, Any]) -> Dict[str, Any]:
        order = np.argsort(np.asarray(group[self.path_column]).astype(str)) if self.path_column in group else None
        if order is not None:
            group = {k: np.asarray(v)[order] if not isinstance(v, list) else [v[i] for i in order] for k, v in group.items()}
        results = self.model.scene(_images(group, self.image_column, self.path_column))
        return _columns(group, self.path_column, results)


def _columns(batch: Dict[str, Any], path_column: str, results: List[Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k, v in batch.items():
        if k in (path_column, "scene"):
            out[k] = np.asarray(v)
    out["depth"] = [r.depth for r in results]
    if all(r.conf is not None for r in results):
        out["conf"] = [r.conf for r in results]
    out["unit"] = np.asarray([r.unit for r in results])
    if all(r.camera is not None for r in results):
        out["extrinsics"] = np.stack([np.asarray(r.camera["extrinsics"], dtype=np.float64) for r in results])
        out["intrinsics"] = np.stack([np.asarray(r.camera["intrinsics"], dtype=np.float64) for r in results])
    return out


def output_path(out_dir: str, path: str) -> Path:
    """The .npy file of an image's depth under out_dir: its base name and a hash of its full path (so
    images of the same name in different folders do not collide)."""
    p = str(path)
    h = hashlib.sha1(p.encode()).hexdigest()[:12]
    return Path(out_dir) / f"{Path(p).stem}-{h}_depth.npy"


def pending(ds: Any, out_dir: str, path_column: str = "path") -> Any:
    """ds without the rows whose depth file exists already (a rerun does only what is left). The
    check reserves no CPU, so it runs beside predictors that hold every CPU of the cluster."""
    return ds.filter(lambda row: not output_path(out_dir, row[path_column]).exists(), num_cpus=0)


def write_npy(batch: Dict[str, Any], out_dir: str, path_column: str = "path") -> Dict[str, Any]:
    """Writes each row's depth to output_path(out_dir, path) (atomically: a temporary file renamed), and
    returns the batch's paths and files. Use it as a ``map_batches`` step after a predictor, with
    ``num_cpus=0`` when the predictors hold every CPU."""
    os.makedirs(out_dir, exist_ok=True)
    files = []
    for path, depth in zip(batch[path_column], batch["depth"]):
        dst = output_path(out_dir, path)
        tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.save(f, np.asarray(depth, dtype=np.float32))
        os.replace(tmp, dst)
        files.append(str(dst))
    return {path_column: np.asarray(batch[path_column]), "file": np.asarray(files)}


def depth_job(paths: Iterable[str], model: str, out_dir: str, *, concurrency: int = 1, threads: int = 1,
              batch_size: int = 8, blocks: Optional[int] = None, device: str = "auto", attempts: int = 3,
              metric_model: Optional[str] = None, predictor: type = None,
              precision: str = "f32") -> List[Dict[str, Any]]:
    """Runs depth for every image of paths into out_dir (output_path), on the connected Ray cluster:
    concurrency actors of threads CPUs each. The images whose output exists are skipped. When the
    pipeline fails (an actor's process or a node is lost: Ray Data's actor pool does not always
    recover from that), it runs again on what is left, up to attempts times, so the outputs are
    those of an undisturbed run. model is a GGUF file or a published name (each actor finds it in
    its node's cache, downloading it there when missing); precision is the CPU products' ("f32",
    "bf16", "int8", "int8c"). predictor replaces DepthPredictor (a subclass, say). Returns the rows written
    (path, file) over all attempts."""
    import ray

    paths = [str(p) for p in paths]
    written: List[Dict[str, Any]] = []
    for attempt in range(attempts):
        ds = ray.data.from_items([{"path": p} for p in paths], override_num_blocks=blocks)
        ds = pending(ds, out_dir)
        kwargs = {"model": model, "metric_model": metric_model, "device": device, "threads": threads,
                  "precision": precision}
        ds = ds.map_batches(predictor or DepthPredictor, fn_constructor_kwargs=kwargs,
                            concurrency=concurrency, num_cpus=threads, batch_size=batch_size,
                            max_restarts=-1, max_task_retries=-1)
        ds = ds.map_batches(write_npy, fn_kwargs={"out_dir": out_dir}, batch_size=batch_size, num_cpus=0)
        try:
            for row in ds.iter_rows():
                written.append(dict(row))
            return written
        except Exception:
            if attempt == attempts - 1:
                raise
    return written
