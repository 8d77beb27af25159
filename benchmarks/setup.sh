#!/usr/bin/env bash
# Installs the Python packages `make bench-compare` needs besides the PyTorch reference (tests/oracle/setup.sh):
# ONNX Runtime (the CPU execution provider), onnx and onnxscript (torch.onnx's exporter), OpenVINO (its CPU plugin)
# and NNCF (OpenVINO's post-training int8 quantization), matplotlib (the plot). Not needed by CI.
#   bash benchmarks/setup.sh
set -euo pipefail
PY=${PYTHON:-python3}
$PY -m pip install -q onnxruntime onnx onnxscript matplotlib
# Pinned: the OpenVINO columns are compared across runs, and NNCF releases follow OpenVINO's.
$PY -m pip install -q "openvino==2026.4.1" "nncf==3.4.0"
$PY -c "import onnxruntime, onnx, onnxscript, openvino, nncf; print('bench deps ok: onnxruntime', onnxruntime.__version__, 'onnx', onnx.__version__, 'openvino', openvino.__version__, 'nncf', nncf.__version__)"
