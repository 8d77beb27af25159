#!/usr/bin/env python3
"""Loop closure and seam ICP on the synthetic scenes: docs/streaming_loop.png.

Reads the CSV files model/stream's TestWriteFigureData writes (ground truth, no model):

    DA3_STREAM_FIGURES=benchmarks/out/loop go test ./model/stream -run TestWriteFigureData -count=1 -v
    python3 benchmarks/stream_loop_figure.py [--dir benchmarks/out/loop] [--out docs/streaming_loop.png]

Left: the camera centres (top view) of 120 frames once around a furnished room, windows of 16 sharing 4,
with drift injected at every seam, aligned to the truth by one Sim(3): chained windows and loop-closed.
Right: the seam error (RMS displacement of the overlap's points from where the true seam puts them, over
their spread) of 20 seeds off the truth by 3°, 5 % scale and 5 % translation, before and after ICP, and
of the Umeyama fit, at three depth noise levels.
"""
import argparse
import csv
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="benchmarks/out/loop")
    ap.add_argument("--out", default="docs/streaming_loop.png")
    a = ap.parse_args()
    traj = list(csv.DictReader(open(os.path.join(a.dir, "loop_trajectories.csv"))))
    seams = list(csv.DictReader(open(os.path.join(a.dir, "seam_errors.csv"))))

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.6))
    col = lambda k: [float(r[k]) for r in traj]  # noqa: E731
    ax1.plot(col("truth_x"), col("truth_z"), "k-", lw=2, label="truth")
    ax1.plot(col("chained_x"), col("chained_z"), "-", color="tab:red", label="chained windows")
    ax1.plot(col("closed_x"), col("closed_z"), "-", color="tab:blue", label="loop closure")
    ax1.plot([col("truth_x")[0]], [col("truth_z")[0]], "ko")
    ax1.set_aspect("equal")
    ax1.set_xlabel("x")
    ax1.set_ylabel("z")
    ax1.set_title("camera centres, drift injected at each seam")
    ax1.legend(loc="best", fontsize=8)

    noises = sorted({r["noise"] for r in seams}, key=float)
    for k, n in enumerate(noises):
        poor = [r for r in seams if r["noise"] == n and r["seed"] == "poor"]
        um = [r for r in seams if r["noise"] == n and r["seed"] == "umeyama"][0]
        x = [k - 0.15] * len(poor)
        ax2.scatter(x, [float(r["before"]) for r in poor], s=12, color="tab:red", label="poor seed" if k == 0 else None)
        ax2.scatter([k + 0.15] * len(poor), [float(r["after"]) for r in poor], s=12, color="tab:blue",
                    label="poor seed + ICP" if k == 0 else None)
        ax2.scatter([k], [float(um["before"])], marker="D", s=30, color="tab:green", label="Umeyama fit" if k == 0 else None)
    ax2.set_yscale("log")
    ax2.set_xticks(range(len(noises)))
    ax2.set_xticklabels([f"{float(n) * 100:g} % depth noise" for n in noises])
    ax2.set_ylabel("seam error (fraction of the overlap's spread)")
    ax2.set_title("one seam, 4 shared frames")
    ax2.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
