package export

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/da3-go/da3-go/export/tsdf"
)

// MeshOptions configure NewMesh.
type MeshOptions struct {
	// Points select the pixels that are fused, as they select a point cloud's: the confidence threshold
	// (computed over all the views as NewPointCloud computes it), the sky and the background filters.
	// Each selected pixel is weighted by its confidence (1 without confidence maps).
	Points Options
	// Volume configures the TSDF. VoxelSize 0 chooses the voxel from the scene: tsdf.AutoVoxelSize of the
	// median depth of the selected pixels (the median of the views' medians), doubled while a frame needs
	// more blocks than Volume.MaxBlocks (at most MaxCoarsen times); a voxel given is never changed and
	// such a frame is an error (tsdf.ErrTooManyBlocks).
	Volume tsdf.Options
}

// MaxCoarsen is how many times NewMesh doubles an automatic voxel to stay within the block limit.
const MaxCoarsen = 4

// MeshStats describe a fusion.
type MeshStats struct {
	tsdf.Stats
	// AutoVoxel: the voxel was chosen from MedianDepth, then doubled Coarsened times.
	AutoVoxel   bool
	MedianDepth float64
	Coarsened   int
	// Threshold is the confidence threshold applied (NaN without confidence).
	Threshold float32
}

// NewMesh fuses the views' depth maps into a TSDF (package tsdf) with their cameras and returns its
// surface as a mesh: one surface where the point cloud of the same views has one layer per view, so
// that views (or the windows of a streamed run) that are slightly misaligned do not show doubled
// surfaces. It reads each view three times (the confidence threshold's two passes, then the fusion), four
// with an automatic voxel (its median depth), and holds one view and the volume at a time.
func NewMesh(src ViewSource, opt MeshOptions) (*tsdf.Mesh, MeshStats, error) {
	v, st, err := FuseViews(src, opt)
	if err != nil {
		return nil, st, err
	}
	return v.Mesh(), st, nil
}

// FuseViews fuses the views as NewMesh does and returns the volume.
func FuseViews(src ViewSource, opt MeshOptions) (*tsdf.Volume, MeshStats, error) {
	st := MeshStats{Threshold: float32(math.NaN())}
	if src.Len() == 0 {
		return nil, st, errors.New("no views")
	}
	po := opt.Points
	if po.ConfPercentile < 0 || po.ConfPercentile > 100 || po.EnsurePercentile < 0 || po.EnsurePercentile > 100 {
		return nil, st, fmt.Errorf("confidence percentiles %g, %g out of range 0–100", po.ConfPercentile, po.EnsurePercentile)
	}
	if math.IsNaN(po.ConfThreshold) {
		return nil, st, errors.New("confidence threshold is NaN")
	}
	thr, err := confThreshold(src, po)
	if err != nil {
		return nil, st, err
	}
	st.Threshold = thr
	vo := opt.Volume
	if vo.VoxelSize == 0 {
		st.AutoVoxel = true
		if st.MedianDepth, err = medianDepth(src, &po, thr); err != nil {
			return nil, st, err
		}
		vo.VoxelSize = tsdf.AutoVoxelSize(st.MedianDepth)
	}
	for {
		v, err := fuse(src, &po, thr, vo)
		if err == nil {
			st.Stats = v.Stats()
			return v, st, nil
		}
		if !st.AutoVoxel || st.Coarsened == MaxCoarsen || !errors.Is(err, tsdf.ErrTooManyBlocks) {
			return nil, st, err
		}
		vo.VoxelSize *= 2
		st.Coarsened++
	}
}

// fuse integrates every view into a new volume.
func fuse(src ViewSource, po *Options, thr float32, vo tsdf.Options) (*tsdf.Volume, error) {
	vol, err := tsdf.New(vo)
	if err != nil {
		return nil, err
	}
	for i := range src.Len() {
		v, err := readView(src, i)
		if err != nil {
			return nil, err
		}
		if v.Camera.Lens != nil {
			return nil, fmt.Errorf("view %d (%s): mesh fusion needs pinhole views, and this one has a lens model (keep the undistorted views)", i, v.Name)
		}
		f := tsdf.Frame{Width: v.Width, Height: v.Height, Depth: v.Depth, Weight: po.weights(&v, thr), RGB: v.RGB,
			K: v.Camera.Intrinsics, WorldToCam: v.Camera.Extrinsics}
		if err := vol.Integrate(&f); err != nil {
			return nil, fmt.Errorf("view %d (%s): %w", i, v.Name, err)
		}
	}
	return vol, nil
}

// weights are a view's per-pixel fusion weights: the confidence of the pixels the options select (1
// without confidence), 0 for the others.
func (o *Options) weights(v *View, thr float32) []float32 {
	w := make([]float32, v.Width*v.Height)
	conf := o.effectiveConf(v)
	for i := range w {
		switch {
		case conf != nil && !(conf[i] >= thr):
		case conf == nil && o.background(v, i):
		case v.Sky != nil && !o.KeepSky && v.Sky[i] >= o.SkyThreshold:
		case conf != nil:
			w[i] = conf[i]
		default:
			w[i] = 1
		}
	}
	return w
}

// medianDepth is the median over the views of the median depth of their selected pixels.
func medianDepth(src ViewSource, o *Options, thr float32) (float64, error) {
	var medians []float64
	for i := range src.Len() {
		v, err := readView(src, i)
		if err != nil {
			return 0, err
		}
		w := o.weights(&v, thr)
		var d []float64
		for p, x := range v.Depth {
			if w[p] > 0 && x > 0 && !math.IsInf(float64(x), 1) {
				d = append(d, float64(x))
			}
		}
		if len(d) > 0 {
			medians = append(medians, median64(d))
		}
	}
	if len(medians) == 0 {
		return 0, errors.New("no pixel with a valid depth is selected: nothing to fuse")
	}
	return median64(medians), nil
}

// MeshCloud returns the mesh's vertices as a point cloud: points on the fused surface, one layer where
// the views' own clouds have one per view. Its points come from no pixel (View 0, Pixel −1): it is for
// WritePLY and WriteGLB, not for COLMAP models.
func MeshCloud(m *tsdf.Mesh) *PointCloud {
	n := m.Len()
	pc := &PointCloud{Points: slices.Clone(m.Vertices), Colors: slices.Clone(m.Colors), View: make([]int32, n),
		Pixel: make([]int32, n), Threshold: float32(math.NaN())}
	for i := range pc.Pixel {
		pc.Pixel[i] = -1
	}
	return pc
}
