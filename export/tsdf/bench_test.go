package tsdf

import (
	"math"
	"runtime"
	"slices"
	"testing"
)

// videoFrames renders n frames of w×h of the room from a camera that walks through it and turns, as a
// video would.
func videoFrames(n, w, h int) []*Frame {
	k := intrinsics(w, h, 60)
	frames := make([]*Frame, n)
	for i := range frames {
		s := float64(i) / float64(n)
		eye := vec{-1 + 2*s, 0.2 * math.Sin(4*s), -1 + 1.5*s}
		yaw := 2 * math.Pi * s
		frames[i] = render(testRoom, k, lookAt(eye, add(eye, vec{math.Sin(yaw), 0.1, math.Cos(yaw)})), w, h)
	}
	return frames
}

// medianDepth is the median of the frames' valid depths.
func medianDepth(frames []*Frame) float64 {
	var d []float32
	for _, f := range frames {
		for _, x := range f.Depth {
			if x > 0 {
				d = append(d, x)
			}
		}
	}
	slices.Sort(d)
	return float64(d[len(d)/2])
}

// BenchmarkFuse64 fuses 64 frames of 504×336 (DA3's processing size of a 3:2 video) at the automatic
// voxel and extracts the mesh. It reports the volume's blocks and memory, the heap in use above what it
// was before (sampled after every frame and after the mesh, garbage not yet collected included) at its
// peak, and the live heap that the volume and the mesh hold at the end.
func BenchmarkFuse64(b *testing.B) {
	frames := videoFrames(64, 504, 336)
	vs := AutoVoxelSize(medianDepth(frames))
	var st Stats
	var tris int
	var peak, live uint64
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		base := heap()
		b.StartTimer()
		v, err := New(Options{VoxelSize: vs})
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range frames {
			if err := v.Integrate(f); err != nil {
				b.Fatal(err)
			}
			peak = max(peak, heap()-base)
		}
		m := v.Mesh()
		peak = max(peak, heap()-base)
		b.StopTimer()
		runtime.GC()
		live = heap() - base
		st, tris = v.Stats(), m.Triangles()
		b.StartTimer()
	}
	b.ReportMetric(float64(st.Blocks), "blocks")
	b.ReportMetric(float64(st.Bytes)/(1<<20), "volume-MiB")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(live)/(1<<20), "live-MiB")
	b.ReportMetric(float64(tris), "triangles")
	b.ReportMetric(vs, "voxel")
}
