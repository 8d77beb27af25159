#!/usr/bin/env bash
# Installs the read-back tools of tests/exportcheck (not needed by CI): pycolmap, trimesh, pygltflib,
# plyfile, numpy and matplotlib (the official exporters' imports) from PyPI, and the Khronos glTF
# validator from npm (package.json + package-lock.json here). The official exporters come with the
# depth-anything-3 package that tests/oracle/setup.sh installs.
#   bash tests/exportcheck/setup.sh
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
$PY -m pip install -q "pycolmap==4.2.1" "trimesh==5.2.0" "pygltflib==1.16.5" "plyfile==1.1.5" "matplotlib==3.11.2" \
  scipy networkx imageio pillow numpy
$PY -c "import pycolmap, trimesh, pygltflib, plyfile, matplotlib; print('exportcheck python deps ok: pycolmap', pycolmap.__version__, 'trimesh', trimesh.__version__)"
if ! command -v npm >/dev/null 2>&1; then
  echo "npm missing: install Node.js (apt-get install nodejs npm) for the glTF validator" >&2
  exit 1
fi
npm ci --silent
node -e "require('gltf-validator'); console.log('gltf-validator ok')"
