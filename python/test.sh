#!/usr/bin/env bash
# make test-python: builds the wheel (make python), installs it into a fresh
# virtual environment with pip --no-index (offline: the wheel from bin/, the
# test dependencies from bin/py-wheels-*, which pip downloads from PyPI the
# first time only), writes the Go library's reference outputs with
# python/tests/goref and runs python/tests against the installed package.
# Without Python 3 it skips with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
GO=${GO:-go}
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "skip: $PYTHON not found: the Python package (python/) is not tested" >&2
  exit 0
fi
start=$(date +%s)
make --no-print-directory python PYTHON="$PYTHON"
wheel=$(ls bin/da3go-*.whl)

deps=bin/py-wheels-$("$PYTHON" -c 'import sys; print("%d%d" % sys.version_info[:2])')
if [ ! -f "$deps/.complete" ]; then
  rm -rf "$deps"
  "$PYTHON" -m pip download -q -d "$deps" numpy pillow pytest
  touch "$deps/.complete"
fi
# Ray Data for the local-cluster test (python/tests/test_ray.py), when it can be installed: that test
# skips, saying so, where it cannot.
rays=bin/py-wheels-ray-$("$PYTHON" -c 'import sys; print("%d%d" % sys.version_info[:2])')
if [ -z "${DA3GO_NO_RAY:-}" ] && [ ! -f "$rays/.complete" ]; then
  rm -rf "$rays"
  if "$PYTHON" -m pip download -q -d "$rays" "ray[data]==2.40.0" numpy pillow pytest; then
    touch "$rays/.complete"
  else
    echo "note: ray[data] could not be downloaded: the Ray test will be skipped" >&2
  fi
fi

venv=bin/py-test
rm -rf "$venv"
"$PYTHON" -m venv "$venv"
"$venv/bin/python" -m pip install -q --no-index --find-links "$deps" "$wheel" pillow pytest
if [ -z "${DA3GO_NO_RAY:-}" ] && [ -f "$rays/.complete" ]; then
  "$venv/bin/python" -m pip install -q --no-index --find-links "$rays" "ray[data]==2.40.0"
fi
# The package under test is the installed wheel, with its bundled library.
"$venv/bin/python" - <<'PY'
import da3go
assert "site-packages" in da3go.__file__, da3go.__file__
assert "site-packages" in str(da3go.library_path()), da3go.library_path()
PY

ref=bin/py-ref
"$GO" run ./python/tests/goref -o "$ref"
# pytest (not python -m pytest): the working directory, with python/da3go
# below it, stays off sys.path.
DA3GO_REF="$PWD/$ref" "$venv/bin/pytest" -q -p no:cacheprovider python/tests
echo "test-python: $(($(date +%s) - start)) s" >&2
