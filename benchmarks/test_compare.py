"""Tests of compare.py's accuracy and table logic (no engine runs):

    python3 -m pytest benchmarks/test_compare.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402
import openvino_bench  # noqa: E402


def pooled(ms: float, rss: float = 100.0, load: float = 10.0, busy: float = 0.0, **extra) -> dict:
    return {"median_ms": ms, "min_ms": ms * 0.9, "p90_ms": ms * 1.1, "runs": 1, "load_ms": load, "first_ms": ms,
            "peak_rss_mib": rss, "foreign_cpu": busy, "loadavg": 0.0, **extra}


def test_accuracy_identical_and_perturbed():
    ref = np.linspace(1.0, 5.0, 60, dtype=np.float32).reshape(1, 6, 10)
    same = compare.accuracy(ref, ref.copy())
    assert same["corr"] == pytest.approx(1.0)
    assert same["max_abs"] == 0.0
    assert same["rel"] == 0.0

    got = ref.copy()
    got[0, 2, 3] += 0.5  # one pixel off by 10 % of max|ref| = 5
    a = compare.accuracy(ref, got)
    assert a["max_abs"] == pytest.approx(0.5)
    assert a["rel"] == pytest.approx(0.1)
    assert a["max_ref"] == pytest.approx(5.0)
    assert a["mean_abs"] == pytest.approx(0.5 / 60)
    assert 0.99 < a["corr"] < 1.0


def test_accuracy_anticorrelated_and_constant():
    ref = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
    assert compare.accuracy(ref, -ref)["corr"] == pytest.approx(-1.0)
    # A constant output has no correlation to speak of: 0, not NaN.
    assert compare.accuracy(ref, np.ones_like(ref))["corr"] == 0.0


def test_accuracy_refuses_other_shapes_and_flags_nonfinite():
    ref = np.ones((1, 4, 4), np.float32)
    with pytest.raises(ValueError, match="differs from the reference"):
        compare.accuracy(ref, np.ones((1, 4, 5), np.float32))
    bad = ref.copy()
    bad[0, 0, 0] = np.nan
    a = compare.accuracy(ref, bad)
    assert a["nonfinite"] is True
    assert a["corr"] is None and a["rel"] is None


def test_job_accuracy_against_reference_file(tmp_path):
    ref = np.linspace(0, 1, 20, dtype=np.float32).reshape(1, 4, 5)
    np.save(tmp_path / "torch.npy", ref)
    np.save(tmp_path / "ov.npy", ref * 1.01)
    files = {"torch": tmp_path / "torch.npy", "openvino bf16": tmp_path / "ov.npy",
             "cpp": None, "da3-go f32": tmp_path / "missing.npy"}
    acc = compare.job_accuracy(files, "torch")
    assert acc["torch"]["rel"] == 0.0
    assert acc["openvino bf16"]["rel"] == pytest.approx(0.01, rel=1e-5)
    assert acc["cpp"] is None
    assert acc["da3-go f32"] is None
    assert compare.job_accuracy({"ov": tmp_path / "ov.npy"}, "torch") == {}


def engines_fixture() -> list[dict]:
    labels = {"torch": ("PyTorch", "f32"), "onnxruntime": ("ONNX Runtime", "f32"),
              "openvino f32": ("OpenVINO", "f32"), "openvino bf16": ("OpenVINO", "bf16"),
              "openvino int8": ("OpenVINO", "int8"), "da3-go f32": ("da3-go", "f32"),
              "da3-go bf16": ("da3-go", "bf16"), "da3-go int8": ("da3-go", "int8"), "cpp": ("C++ engine", "f32")}
    p = {"torch": pooled(1000, rss=900), "onnxruntime": pooled(500), "openvino f32": pooled(400, precision="f32"),
         "openvino bf16": pooled(200, precision="bf16"), "openvino int8": pooled(100, rss=300, precision="bf16"),
         "da3-go f32": pooled(400, rss=200), "da3-go bf16": pooled(250), "da3-go int8": pooled(200, rss=150),
         "cpp": pooled(800)}
    acc = {k: {"corr": 1.0, "rel": 1e-6, "max_abs": 1e-6, "mean_abs": 1e-7} for k in labels if k != "cpp"}
    acc["openvino int8"] = {"corr": 0.95, "rel": 0.2, "max_abs": 0.2, "mean_abs": 0.01}
    acc["da3-go int8"] = {"corr": 0.9999, "rel": 0.01, "max_abs": 0.01, "mean_abs": 0.001}
    acc["cpp"] = None
    return compare.engine_rows("da3-small", "280x182", labels, p, acc)


def test_engine_rows():
    rows = {r["job"]: r for r in engines_fixture()}
    assert len(rows) == 9
    assert rows["torch"]["vs_torch"] == pytest.approx(1.0)
    assert rows["openvino int8"]["vs_torch"] == pytest.approx(10.0)
    assert rows["openvino int8"]["corr"] == 0.95
    assert rows["cpp"]["corr"] is None
    assert rows["da3-go f32"]["label"] == "DA3-SMALL"


def test_engine_rows_reference_job():
    labels = {"torch": ("PyTorch", "f32"), "torch-orig": ("PyTorch", "f32 (orig)")}
    p = {"torch": pooled(600), "torch-orig": pooled(300)}
    acc = {"torch": {"corr": 0.999, "rel": 0.05, "max_abs": 0.1, "mean_abs": 0.01},
           "torch-orig": {"corr": 1.0, "rel": 0.0, "max_abs": 0.0, "mean_abs": 0.0}}
    rows = compare.engine_rows("da2-vits", "280x280", labels, p, acc, ref="torch-orig")
    assert [r["reference"] for r in rows] == [False, True]
    lines = compare.engine_table(rows).splitlines()
    assert "0.999000" in lines[1] and "5.00e-02" in lines[1]
    assert lines[2].split()[-3:-1] == ["ref", "ref"]
    assert compare.MODELS["da2-vits"]["ref"] == "torch-orig"


def test_ov_ratios_pair_precisions():
    ratios = {r["precision"]: r for r in compare.ov_ratios(engines_fixture())}
    assert set(ratios) == {"f32", "bf16", "int8"}
    f32, bf16, int8 = ratios["f32"], ratios["bf16"], ratios["int8"]
    assert (f32["go"], f32["ov"]) == ("f32", "f32")
    assert f32["speedup"] == pytest.approx(1.0)
    assert bf16["speedup"] == pytest.approx(200 / 250)  # OpenVINO faster: < 1
    assert int8["speedup"] == pytest.approx(0.5)
    assert int8["rss_ratio"] == pytest.approx(150 / 300)
    # The faster OpenVINO int8 is the less accurate one, and the row says so.
    assert int8["ov_corr"] == 0.95 and int8["go_corr"] == 0.9999


def test_tables_show_accuracy_beside_time():
    engines = engines_fixture()
    text = compare.engine_table(engines)
    lines = text.splitlines()
    assert "depth corr" in lines[0] and "max|d|/max|ref|" in lines[0]
    ov_int8 = next(l for l in lines if "OpenVINO" in l and " int8 " in l)
    assert "0.950000" in ov_int8 and "2.00e-01" in ov_int8 and "10.00x" in ov_int8
    torch = next(l for l in lines if "PyTorch" in l)
    assert "ref" in torch
    cpp = next(l for l in lines if "C++" in l)
    assert cpp.split()[-3:-1] == ["-", "-"]  # no accuracy for the engine fed from the PNG

    ov = compare.ov_table(compare.ov_ratios(engines)).splitlines()
    int8 = next(l for l in ov if " int8 " in l)
    assert "0.50x" in int8 and "0.999900 / 0.950000" in int8 and "1.00e-02 / 2.00e-01" in int8


def test_engine_mode_shows_precision_that_ran():
    e = {"engine": "OpenVINO", "mode": "bf16", "precision": "f32"}
    assert compare.engine_mode(e) == "bf16 (ran f32)"
    assert compare.engine_mode({**e, "precision": "bf16"}) == "bf16"
    assert compare.engine_mode({"engine": "OpenVINO", "mode": "int8", "precision": "bf16"}) == "int8"
    assert compare.engine_mode({"engine": "da3-go", "mode": "bf16", "precision": "f32"}) == "bf16"


def test_fmt_acc():
    assert compare.fmt_acc(None, None) == ("-", "-")
    assert compare.fmt_acc(0.5, 0.1, ref=True) == ("ref", "ref")
    assert compare.fmt_acc(None, None, nonfinite=True) == ("NaN/inf", "NaN/inf")
    assert compare.fmt_acc(0.9999876, 0.000123) == ("0.999988", "1.23e-04")


def test_tables_json_drops_raw_and_is_strict_json():
    engines = engines_fixture()
    result = {"env": {"cpu": "x"}, "rows": [{"model": "m", "raw": {"go": [1]}}], "engines": engines,
              "ov_ratios": compare.ov_ratios(engines), "sweeps": None, "targets": []}
    doc = json.loads(json.dumps(compare.tables_json(result), allow_nan=False))
    assert "raw" not in doc["rows"][0]
    assert len(doc["engines"]) == 9 and len(doc["ov_ratios"]) == 3


def test_parse_list_and_quick_defaults():
    assert compare.parse_list(None, compare.OV_MODES, "mode") is None
    assert compare.parse_list("none", compare.OV_MODES, "mode") == []
    assert compare.parse_list("f32, int8", compare.OV_MODES, "mode") == ["f32", "int8"]
    with pytest.raises(SystemExit, match="unknown mode fp8"):
        compare.parse_list("f32,fp8", compare.OV_MODES, "mode")
    import argparse

    a = argparse.Namespace(models=None, variants=None, rounds=3, repeat=3, only=None, process_res=None,
                           quiet_idle=None, retries=None)
    compare.quick_defaults(a)
    assert (a.models, a.variants, a.rounds, a.repeat, a.only, a.process_res) == (
        "da3-small", "f32,bf16,int8", 1, 1, "main", 280)
    assert (a.quiet_idle, a.retries) == (0.0, 0)
    b = argparse.Namespace(models="da2-vits", variants=None, rounds=3, repeat=3, only=None, process_res=518,
                           quiet_idle=0.5, retries=1)
    compare.quick_defaults(b)
    assert (b.models, b.process_res, b.quiet_idle, b.retries) == ("da2-vits", 518, 0.5, 1)


def test_openvino_compile_config():
    cfg = openvino_bench.compile_config(2, "bf16")
    assert cfg == {"INFERENCE_NUM_THREADS": 2, "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1,
                   "INFERENCE_PRECISION_HINT": "bf16"}
    with pytest.raises(ValueError):
        openvino_bench.compile_config(2, "int8")
    with pytest.raises(ValueError):
        openvino_bench.compile_config(0, "f32")


def test_depth_file_names_are_safe():
    p = compare.depth_file("da3-base", Path("da3-504-1v.npy"), "da3-go int8 pure")
    assert p.name == "da3-go_int8_pure.npy"
    assert p.parent.name == "da3-base-da3-504-1v"


def test_ov_targets():
    ratios = compare.ov_ratios(engines_fixture())
    got = {(t["variant"], t["quantity"]): t for t in compare.check_ov_targets(ratios)}
    f32 = got[("f32 vs OpenVINO f32", "speedup")]
    assert f32["value"] == pytest.approx(1.0) and not f32["pass"]  # equal speed is under 1.2x
    assert got[("int8 vs OpenVINO int8", "rss_ratio")]["pass"]  # 150 / 300 MiB
    assert not got[("f32 vs OpenVINO f32", "rss_ratio")]["pass"]  # 200 / 100 MiB
    # load + first run: (10 + 400) / (10 + 400) is no 10x faster start
    assert got[("f32 vs OpenVINO f32", "start_ratio")]["value"] == pytest.approx(1.0)
    margin = got[("int8 vs OpenVINO int8", "corr_margin")]
    assert margin["value"] == pytest.approx(0.0499) and margin["pass"]
    assert ("f32 vs OpenVINO f32", "corr_margin") not in got  # only int8 is judged on accuracy
    # a da3-go int8 less accurate than OpenVINO's fails
    worse = [dict(r, corr_margin=-1e-3) for r in ratios]
    assert not next(t for t in compare.check_ov_targets(worse) if t["quantity"] == "corr_margin")["pass"]
