#!/usr/bin/env bash
# Installs the Python packages `make bench-compare` needs besides the PyTorch reference (tests/oracle/setup.sh):
# ONNX Runtime (the CPU execution provider), onnx and onnxscript (torch.onnx's exporter), matplotlib (the plot).
# Not needed by CI.
#   bash benchmarks/setup.sh
set -euo pipefail
PY=${PYTHON:-python3}
$PY -m pip install -q onnxruntime onnx onnxscript matplotlib
$PY -c "import onnxruntime, onnx, onnxscript; print('bench deps ok: onnxruntime', onnxruntime.__version__, 'onnx', onnx.__version__)"
