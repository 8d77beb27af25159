package server

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/da3-go/da3-go/export"
	"github.com/da3-go/da3-go/export/gsvideo"
	"github.com/da3-go/da3-go/export/tsdf"
	"github.com/da3-go/da3-go/model/gs"
)

// scene is one request's processed-size views for package export, and the
// point cloud made from them once.
type scene struct {
	// ctx is the request's: the long exports (gs_video) stop when it ends.
	ctx        context.Context
	views      []export.View
	gaussians  []byte // the gs_ply file, when asked for
	splats     *gs.Gaussians
	cams       []gsvideo.Camera // the views' cameras, with splats
	confThresh float32
	pc         *export.PointCloud
	mesh       *tsdf.Mesh
}

// points is the scene's point cloud: with points_conf_thresh > 0 the pixels
// whose confidence is at least that (clamped to the range of the
// confidence), else the official exporter's selection (conf ≥ 1.05 clamped
// to the 40th–90th percentiles); sky pixels are left out.
func (sc *scene) points() (*export.PointCloud, error) {
	if sc.pc != nil {
		return sc.pc, nil
	}
	o := export.DefaultOptions()
	if sc.confThresh > 0 {
		o.ConfThreshold, o.ConfPercentile, o.EnsurePercentile = float64(sc.confThresh), 0, 100
	}
	pc, err := export.NewPointCloud(sc.views, o)
	if err != nil {
		return nil, err
	}
	sc.pc = pc
	return pc, nil
}

// meshBlocks caps the TSDF volume of the mesh exports at 32 MiB (4096
// blocks of 8³ voxels): the automatic voxel is doubled until the views fit.
const meshBlocks = 1 << 12

// fusedMesh is the scene's TSDF mesh (mesh_ply, mesh_glb): the pixels of
// points' selection, weighted by their confidence, fused at the automatic
// voxel within meshBlocks.
func (sc *scene) fusedMesh() (*tsdf.Mesh, error) {
	if sc.mesh != nil {
		return sc.mesh, nil
	}
	o := export.DefaultOptions()
	if sc.confThresh > 0 {
		o.ConfThreshold, o.ConfPercentile, o.EnsurePercentile = float64(sc.confThresh), 0, 100
	}
	m, _, err := export.NewMesh(export.ViewSlice(sc.views), export.MeshOptions{Points: o, Volume: tsdf.Options{MaxBlocks: meshBlocks}})
	if err != nil {
		return nil, err
	}
	sc.mesh = m
	return m, nil
}

// exporter writes one scene file format.
type exporter struct {
	mediaType, filename string
	camera              bool // needs cameras (a DA3 any-view model)
	write               func(w io.Writer, sc *scene) error
}

// maxExportPoints caps the points of GLB and PLY files, as the official
// exporter does.
const maxExportPoints = 1_000_000

// exporters are the scene files a request may ask for in "exports", written
// as da3-go reconstruct writes them.
var exporters = map[string]exporter{
	"glb": {"model/gltf-binary", "scene.glb", true, func(w io.Writer, sc *scene) error {
		pc, err := sc.points()
		if err != nil {
			return err
		}
		return export.EncodeGLB(w, pc, sc.views, export.DefaultGLBOptions())
	}},
	"ply": {"application/octet-stream", "scene.ply", true, func(w io.Writer, sc *scene) error {
		pc, err := sc.points()
		if err != nil {
			return err
		}
		return export.EncodePLY(w, pc.Subsample(maxExportPoints, 0))
	}},
	"npz": {"application/zip", "results.npz", false, func(w io.Writer, sc *scene) error {
		return export.EncodeNPZ(w, sc.views, false)
	}},
	"mini_npz": {"application/zip", "results_mini.npz", false, func(w io.Writer, sc *scene) error {
		return export.EncodeNPZ(w, sc.views, true)
	}},
	"colmap": {"application/zip", "colmap.zip", true, func(w io.Writer, sc *scene) error { return writeCOLMAPZip(w, sc, false) }},
	// The same with each point observed by every view that sees it (for bundle adjustment).
	"colmap_tracks": {"application/zip", "colmap.zip", true, func(w io.Writer, sc *scene) error { return writeCOLMAPZip(w, sc, true) }},
	// The views' depth fused into one triangle mesh (TSDF), as PLY and GLB.
	"mesh_ply": {"application/octet-stream", "mesh.ply", true, func(w io.Writer, sc *scene) error {
		m, err := sc.fusedMesh()
		if err != nil {
			return err
		}
		return export.EncodeMeshPLY(w, m)
	}},
	// The fused mesh's vertices as a point cloud: one surface where the views' clouds double it.
	"mesh_points": {"application/octet-stream", "mesh_points.ply", true, func(w io.Writer, sc *scene) error {
		m, err := sc.fusedMesh()
		if err != nil {
			return err
		}
		return export.EncodePLY(w, export.MeshCloud(m))
	}},
	"mesh_glb": {"model/gltf-binary", "mesh.glb", true, func(w io.Writer, sc *scene) error {
		m, err := sc.fusedMesh()
		if err != nil {
			return err
		}
		return export.EncodeMeshGLB(w, m, sc.views, export.DefaultGLBOptions())
	}},
	// The official fly-through video of DA3-GIANT's Gaussians (MP4, ffmpeg).
	"gs_video": {"video/mp4", "gs_video.mp4", true, writeGSVideo},
	// DA3-GIANT's 3D Gaussians as the official gs_ply export writes them.
	"gs_ply": {"application/octet-stream", "gaussians.ply", true, func(w io.Writer, sc *scene) error {
		_, err := w.Write(sc.gaussians)
		return err
	}},
}

// writeCOLMAPZip writes the official COLMAP export (binary cameras, images,
// points3D), or with tracks export.NewCOLMAPModelWithTracks's, as a zip
// archive, in memory: the server writes no files.
func writeCOLMAPZip(w io.Writer, sc *scene, tracks bool) error {
	pc, err := export.NewPointCloud(sc.views, export.COLMAPOptions())
	if err != nil {
		return err
	}
	var m *export.COLMAPModel
	if tracks {
		m, err = export.NewCOLMAPModelWithTracks(pc, sc.views, export.TrackOptions{})
	} else {
		m, err = export.NewCOLMAPModel(pc, sc.views)
	}
	if err != nil {
		return err
	}
	z := zip.NewWriter(w)
	err = m.Encode(false, func(name string, write func(io.Writer) error) error {
		f, err := z.Create("sparse/0/" + name)
		if err != nil {
			return err
		}
		return write(f)
	})
	if err != nil {
		return err
	}
	return z.Close()
}

func (e exporter) encode(sc *scene) ([]byte, error) {
	var buf bytes.Buffer
	if err := e.write(&buf, sc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func canExport(name string) bool { _, ok := exporters[name]; return ok }

// allExports is every export name, sorted.
func allExports() []string {
	names := make([]string, 0, len(exporters))
	for n := range exporters {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// exportsFor lists the exports model m can make.
func exportsFor(m ModelInfo) []string {
	var names []string
	for _, n := range allExports() {
		if (m.Camera || !exporters[n].camera) && (!gaussianExport(n) || m.Gaussians) && (n != "gs_video" || haveFFmpeg()) {
			names = append(names, n)
		}
	}
	return names
}

// exportError names the export that failed.
func exportError(name string, err error) error { return fmt.Errorf("export %s: %w", name, err) }
