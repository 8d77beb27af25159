#!/usr/bin/env python3
"""stage_ggml.py SRC DEST PATCHDIR... -- a patched copy of the pinned ggml tree.

The GPU backends that need fixes to build or to compute correctly here are
built from a staged copy of the module's ggml sources (SRC, read-only in the
module cache) with the patches of each PATCHDIR applied in name order
(unified diffs, `patch -p1` from the ggml root, no fuzz: a patch whose context
no longer matches the sources fails loudly, naming it).

DEST is rewritten file by file, and only where the content differs, so that an
unchanged stage leaves every timestamp alone and CMake rebuilds nothing. Go
files are left out; DEST/DA3_VERSION names the module version (as
scripts/pack_ggml_src.sh writes it) and DEST/DA3_PATCHES the patches applied.

ggml-vulkan's configure step probes glslc with shaders in
vulkan-shaders/feature-tests/, which the module's copy of ggml lacks; without
them the probe reads glslc's "cannot open input file" as support for every
extension. The stage adds them (one `#extension ... : require` each).
"""
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile

FEATURE_TESTS = {
    "coopmat.comp": "GL_KHR_cooperative_matrix",
    "coopmat2.comp": "GL_NV_cooperative_matrix2",
    "integer_dot.comp": "GL_EXT_integer_dot_product",
    "bfloat16.comp": "GL_EXT_bfloat16",
}


def fail(msg):
    print(f"stage_ggml: {msg}", file=sys.stderr)
    sys.exit(1)


def build_stage(src, version, patch_dirs, out):
    shutil.copytree(src, out, copy_function=shutil.copyfile,
                    ignore=shutil.ignore_patterns("*.go"), dirs_exist_ok=True)
    ft = os.path.join(out, "src", "ggml-vulkan", "vulkan-shaders", "feature-tests")
    if os.path.isdir(os.path.dirname(ft)):
        os.makedirs(ft, exist_ok=True)
        for name, ext in FEATURE_TESTS.items():
            path = os.path.join(ft, name)
            if not os.path.exists(path):
                with open(path, "w") as f:
                    f.write(f"#version 460\n\n#extension {ext} : require\n\nvoid main()\n{{\n}}\n")
    applied = []
    for d in patch_dirs:
        for name in sorted(os.listdir(d)):
            if not name.endswith(".patch"):
                continue
            p = os.path.join(d, name)
            r = subprocess.run(["patch", "-p1", "--forward", "--batch", "--fuzz=0", "--no-backup-if-mismatch",
                                "-r", "-", "-d", out, "-i", os.path.abspath(p)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                fail(f"{p} no longer applies to {src} (the upstream text it patches changed): "
                     f"update or drop it\n{r.stdout}{r.stderr}")
            applied.append(name)
    with open(os.path.join(out, "DA3_VERSION"), "w") as f:
        f.write(version + "\n")
    with open(os.path.join(out, "DA3_PATCHES"), "w") as f:
        f.write("".join(a + "\n" for a in applied))
    return applied


def sync(stage, dest):
    """Make dest equal to stage, touching only the files that differ."""
    changed = 0
    for root, dirs, files in os.walk(stage):
        rel = os.path.relpath(root, stage)
        droot = os.path.join(dest, rel)
        os.makedirs(droot, exist_ok=True)
        for name in files:
            s, t = os.path.join(root, name), os.path.join(droot, name)
            if os.path.isfile(t) and filecmp.cmp(s, t, shallow=False):
                continue
            shutil.copyfile(s, t)
            changed += 1
    for root, dirs, files in os.walk(dest, topdown=False):
        rel = os.path.relpath(root, dest)
        sroot = os.path.join(stage, rel)
        for name in files:
            if not os.path.exists(os.path.join(sroot, name)):
                os.remove(os.path.join(root, name))
                changed += 1
        if not os.path.isdir(sroot):
            os.rmdir(root)
    return changed


def main():
    if len(sys.argv) < 3:
        fail("usage: stage_ggml.py SRC DEST [PATCHDIR...]")
    src, dest, patch_dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
    if not os.path.isfile(os.path.join(src, "src", "ggml-backend-reg.cpp")):
        fail(f"{src} is not a ggml tree")
    version = os.environ.get("DA3_GGML_VERSION", "").strip()
    packed = os.path.join(src, "DA3_VERSION")
    if not version and os.path.isfile(packed):
        version = open(packed).read().strip()
    if not version:
        fail("DA3_GGML_VERSION is not set and the sources have no DA3_VERSION")
    with tempfile.TemporaryDirectory(prefix="da3-stage-") as tmp:
        out = os.path.join(tmp, "ggml")
        applied = build_stage(src, version, patch_dirs, out)
        changed = sync(out, dest)
    print(f"stage_ggml: {dest}: {version}, patches {', '.join(applied) or 'none'}; "
          f"{changed} file(s) rewritten")


if __name__ == "__main__":
    main()
