#!/usr/bin/env bash
# Installs the PyTorch reference used by the oracle scripts (CPU only; not needed by CI).
#   bash tests/oracle/setup.sh
# Heavy packages with long dependency lists (depth-anything-3, transformers) are installed with
# --no-deps, followed by only the modules the oracles import.
set -euo pipefail
PY=${PYTHON:-python3}
$PY -m pip install -q "torch>=2.4" numpy safetensors einops opencv-python-headless pillow
$PY -m pip install -q --no-deps "transformers==4.57.6" "depth-anything-3==0.1.1"
$PY -m pip install -q huggingface_hub tokenizers regex pyyaml packaging filelock tqdm requests omegaconf addict
$PY -c "import torch, numpy, safetensors, cv2; print('oracle deps ok: torch', torch.__version__)"
# DA2 oracle: transformers 4.57.6 refuses to import with tokenizers > 0.23.0 or huggingface_hub >= 1.0.
$PY -m pip install -q "tokenizers>=0.22.0,<=0.23.0" "huggingface_hub>=0.34.0,<1.0"
# DA2 oracle: the original Depth-Anything-V2 model code (pure Python, packaged from the upstream repo) used to
# cross-check transformers; --no-deps because it declares gradio/torchvision which the oracle does not need.
$PY -m pip install -q --no-deps "jkp-depth-anything-v2==0.1.1"
$PY -c "import importlib.util, transformers; assert importlib.util.find_spec('depth_anything_v2'); print('da2 oracle deps ok: transformers', transformers.__version__)"
# DA3 oracle: depth_anything_3.utils.parallel_utils (imported by InputProcessor) needs imageio (pure Python).
$PY -m pip install -q imageio
# DA3 pose/Gaussian oracles: align_poses_umeyama needs evo, rotate_sh needs e3nn (--no-deps: their
# plotting and GUI dependencies are not used), gs_ply needs plyfile.
$PY -m pip install -q --no-deps "evo==1.38.1" "e3nn==0.6.0" "opt_einsum_fx==0.1.4"
$PY -m pip install -q opt_einsum scipy plyfile
$PY -c "import evo.core.trajectory, e3nn.o3, plyfile; print('da3 pose/gs oracle deps ok')"
