package stream

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/da3-go/da3-go/internal/imgio"
	"github.com/da3-go/da3-go/internal/safeio"
	"github.com/da3-go/da3-go/model"
)

// A window's results live in <dir>/window-NNNNN.npz: a zip (stored, not compressed) of meta.json and
// numpy arrays of its V views of H×W maps, raw as the window's scene gave them, in the window's own world
// frame:
//
//	image                uint8   (V, H, W, 3)  processed RGB
//	depth                float32 (V, H, W)
//	conf, sky            float32 (V, H, W)     when the model gives them
//	extrinsics           float64 (V, 3, 4)     world-to-camera
//	intrinsics           float64 (V, 3, 3)     for the maps
//	intrinsics_original  float64 (V, 3, 3)     for the original images
//	pose_encoding        float32 (V, 9)
//
// meta.json holds the window, its frames' names and content keys, the run's fingerprint (model and
// settings), the sizes and units, the SHA-256 of every array's bytes, and to_world: the similarity
// x ↦ scale·rotation·x + translation from the window's frame to the run's (window 0's). The file is
// written to a temporary name and renamed when complete, so a window file that exists is whole; a window
// is resumed only when its frames' keys and the fingerprint are the run's and every array matches its
// digest.

const storeVersion = 2

type windowMeta struct {
	Version int      `json:"version"`
	Window  Window   `json:"window"`
	Frames  []string `json:"frames"`
	// Keys are the frames' content keys (Frame.Key), Fingerprint the run's (Options.Fingerprint).
	Keys        []string `json:"keys"`
	Fingerprint string   `json:"fingerprint"`
	// Arrays are the SHA-256 (hex) of each array's .npy bytes, by name.
	Arrays  map[string]string `json:"arrays"`
	ToWorld sim3JSON          `json:"to_world"`
	// Align describes the alignment to the previous window (none for window 0).
	Align *alignMeta `json:"align,omitempty"`
	// MetricScale is the scale the window's metric branch gave its run (MetricScene), 0 when unknown.
	MetricScale float64    `json:"metric_scale,omitempty"`
	Views       []viewMeta `json:"views"`
	// Width, Height of every view's maps.
	Width  int  `json:"width"`
	Height int  `json:"height"`
	Conf   bool `json:"conf"`
	Sky    bool `json:"sky"`
	RGB    bool `json:"rgb"`
}

// sim3JSON stores a Sim3 exactly (JSON numbers round-trip float64).
type sim3JSON struct {
	Scale       float64       `json:"scale"`
	Rotation    [3][3]float64 `json:"rotation"`
	Translation [3]float64    `json:"translation"`
}

func (j sim3JSON) sim3() (Sim3, error) {
	a := Sim3{S: j.Scale, R: j.Rotation, T: j.Translation}
	// Check through the matrix form: a positive scale times a rotation, finite.
	if _, err := Sim3FromMatrix(a.Matrix()); err != nil || !(a.S > 0) {
		return Sim3{}, fmt.Errorf("not a similarity (scale %g): %v", a.S, err)
	}
	return a, nil
}

type alignMeta struct {
	Points, Valid, Iterations int
	ConfThreshold             *float64 `json:",omitempty"`
	RMS                       float64
	ICP                       *icpMeta `json:",omitempty"`
}

// icpMeta records a seam's ICP refinement: kept or why not, the seam error before and after.
type icpMeta struct {
	Kept          bool
	Reason        string  `json:",omitempty"`
	Steps, Pairs  int     `json:",omitempty"`
	Before, After float64 `json:",omitempty"`
}

type viewMeta struct {
	ProcessedWidth  int    `json:"processed_width"`
	ProcessedHeight int    `json:"processed_height"`
	OrigWidth       int    `json:"orig_width"`
	OrigHeight      int    `json:"orig_height"`
	Cropped         bool   `json:"cropped,omitempty"`
	Unit            string `json:"unit"`
	NonFinite       string `json:"non_finite,omitempty"`
}

func windowPath(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("window-%05d.npz", i))
}

// units maps DepthUnit names back to values.
var units = map[string]model.DepthUnit{}

func init() {
	for _, u := range []model.DepthUnit{model.Relative, model.Disparity, model.FocalNormalised, model.Metres} {
		units[u.String()] = u
	}
}

// windowRecord is a window's place in its run: the frames' names and content keys, the run's
// fingerprint, the transform to the run's frame and the alignment that gave it (nil for window 0).
type windowRecord struct {
	Window      Window
	Names, Keys []string
	Fingerprint string
	ToWorld     Sim3
	Align       *AlignStats
	MetricScale float64
}

// writeWindow writes a window's raw results (all at the processed size, one size, with cameras).
func writeWindow(dir string, rec windowRecord, res []model.Result) error {
	meta, err := newWindowMeta(rec, res)
	if err != nil {
		return err
	}
	arrays := meta.arrays()
	return imgio.WriteAtomic(windowPath(dir, rec.Window.Index), func(out io.Writer) error {
		return writeWindowZip(out, meta, arrays, res)
	})
}

// newWindowMeta describes a window's results in meta.json (the arrays' digests still to come), checking
// that every view has view 0's size and maps, and a camera.
func newWindowMeta(rec windowRecord, res []model.Result) (windowMeta, error) {
	w, names := rec.Window, rec.Names
	if len(res) != w.Len() || len(names) != w.Len() || len(rec.Keys) != w.Len() {
		return windowMeta{}, fmt.Errorf("window %d: %d results and %d names for %d frames", w.Index, len(res), len(names), w.Len())
	}
	W, H := res[0].Width, res[0].Height
	toWorld := rec.ToWorld
	meta := windowMeta{Version: storeVersion, Window: w, Frames: names, Keys: rec.Keys, Fingerprint: rec.Fingerprint, Arrays: map[string]string{}, ToWorld: sim3JSON{toWorld.S, toWorld.R, toWorld.T}, Width: W, Height: H,
		Conf: res[0].Conf != nil, Sky: res[0].Sky != nil, RGB: res[0].RGB != nil, MetricScale: finite(rec.MetricScale)}
	if st := rec.Align; st != nil {
		meta.Align = &alignMeta{Points: st.Points, Valid: st.Valid, Iterations: st.Iterations, RMS: st.RMS}
		if ic := st.ICP; ic != nil {
			meta.Align.ICP = &icpMeta{Kept: ic.Kept, Reason: ic.Reason, Steps: ic.Iterations, Pairs: ic.Points, Before: finite(ic.Before), After: finite(ic.After)}
		}
		if !math.IsNaN(st.ConfThreshold) {
			c := st.ConfThreshold
			meta.Align.ConfThreshold = &c
		}
	}
	for i := range res {
		v, err := meta.view(i, &res[i])
		if err != nil {
			return windowMeta{}, err
		}
		meta.Views = append(meta.Views, v)
	}
	return meta, nil
}

// view checks that view i's results have view 0's size and maps, and a camera, and describes them.
func (m *windowMeta) view(i int, r *model.Result) (viewMeta, error) {
	W, H, index, name := m.Width, m.Height, m.Window.Index, m.Frames[i]
	n := W * H
	if r.Width != W || r.Height != H || len(r.Depth) != n {
		return viewMeta{}, fmt.Errorf("window %d: view %d (%s) has %dx%d maps, view 0 %dx%d: streaming needs frames that process to one size", index, i, name, r.Width, r.Height, W, H)
	}
	if r.Camera == nil {
		return viewMeta{}, fmt.Errorf("window %d: view %d (%s) has no camera", index, i, name)
	}
	if (r.Conf != nil) != m.Conf || (r.Sky != nil) != m.Sky || (r.RGB != nil) != m.RGB ||
		(r.Conf != nil && len(r.Conf) != n) || (r.Sky != nil && len(r.Sky) != n) || (r.RGB != nil && len(r.RGB) != 3*n) {
		return viewMeta{}, fmt.Errorf("window %d: view %d (%s) has other maps than view 0", index, i, name)
	}
	return viewMeta{ProcessedWidth: r.ProcessedWidth, ProcessedHeight: r.ProcessedHeight,
		OrigWidth: r.OrigWidth, OrigHeight: r.OrigHeight, Cropped: r.Cropped, Unit: r.Unit.String(), NonFinite: r.NonFinite}, nil
}

// npyArray is one array of a window file: its element type (zero), its shape, and each view's part of it.
type npyArray struct {
	name  string
	zero  any
	shape []int
	part  func(r *model.Result) any
}

// arrays lists the window file's arrays, in the order they are written.
func (m *windowMeta) arrays() []npyArray {
	V, H, W := len(m.Views), m.Height, m.Width
	arrays := []npyArray{{"depth", []float32(nil), []int{V, H, W}, func(r *model.Result) any { return r.Depth }}}
	if m.RGB {
		arrays = append(arrays, npyArray{"image", []uint8(nil), []int{V, H, W, 3}, func(r *model.Result) any { return r.RGB }})
	}
	if m.Conf {
		arrays = append(arrays, npyArray{"conf", []float32(nil), []int{V, H, W}, func(r *model.Result) any { return r.Conf }})
	}
	if m.Sky {
		arrays = append(arrays, npyArray{"sky", []float32(nil), []int{V, H, W}, func(r *model.Result) any { return r.Sky }})
	}
	return append(arrays,
		npyArray{"extrinsics", []float64(nil), []int{V, 3, 4}, func(r *model.Result) any { return rows(r.Camera.Extrinsics, 4) }},
		npyArray{"intrinsics", []float64(nil), []int{V, 3, 3}, func(r *model.Result) any { return rows(pad34(r.Camera.Intrinsics), 3) }},
		npyArray{"intrinsics_original", []float64(nil), []int{V, 3, 3}, func(r *model.Result) any { return rows(pad34(r.Camera.IntrinsicsOriginal), 3) }},
		npyArray{"pose_encoding", []float32(nil), []int{V, 9}, func(r *model.Result) any { return r.Camera.PoseEncoding[:] }})
}

// rows flattens the first k columns of a 3×4 matrix, row by row.
func rows(m [3][4]float64, k int) []float64 {
	var out []float64
	for r := range 3 {
		out = append(out, m[r][:k]...)
	}
	return out
}

// pad34 is a 3×3 matrix as the first columns of a 3×4 one.
func pad34(k [3][3]float64) [3][4]float64 {
	return [3][4]float64{{k[0][0], k[0][1], k[0][2]}, {k[1][0], k[1][1], k[1][2]}, {k[2][0], k[2][1], k[2][2]}}
}

// writeWindowZip writes the window file's zip: each array written view by view (no copy of the window's
// maps), then meta.json with their digests.
func writeWindowZip(out io.Writer, meta windowMeta, arrays []npyArray, res []model.Result) error {
	z := zip.NewWriter(out)
	for _, a := range arrays {
		sum, err := writeNPY(z, a, res)
		if err != nil {
			return err
		}
		meta.Arrays[a.name] = sum
	}
	// meta.json last: it holds the arrays' digests.
	js, err := json.MarshalIndent(meta, "", " ")
	if err != nil {
		return err
	}
	f, err := z.CreateHeader(&zip.FileHeader{Name: "meta.json", Method: zip.Store})
	if err != nil {
		return err
	}
	if _, err := f.Write(js); err != nil {
		return err
	}
	return z.Close()
}

// writeNPY writes one array into the zip and returns the SHA-256 (hex) of its .npy bytes.
func writeNPY(z *zip.Writer, a npyArray, res []model.Result) (string, error) {
	zf, err := z.CreateHeader(&zip.FileHeader{Name: a.name + ".npy", Method: zip.Store})
	if err != nil {
		return "", err
	}
	h := sha256.New()
	f := io.MultiWriter(zf, h)
	if err := imgio.EncodeNPYHeader(f, a.zero, a.shape...); err != nil {
		return "", err
	}
	for i := range res {
		if err := imgio.EncodeNPYData(f, a.part(&res[i])); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// storedWindow is a window read back from its file.
type storedWindow struct {
	meta    windowMeta
	toWorld Sim3
	results []model.Result // raw, in the window's frame
	// arrays are the decoded arrays by name, for reuse by the next read.
	arrays map[string]any
}

// readWindowMeta reads only a window file's meta.json.
func readWindowMeta(path string) (windowMeta, error) {
	z, err := openZip(path)
	if err != nil {
		return windowMeta{}, fmt.Errorf("window file %s: %w", path, err)
	}
	defer z.Close()
	m, _, err := decodeMeta(path, z)
	return m, err
}

// zipFile is a window file open for reading.
type zipFile struct {
	*zip.Reader
	f *os.File
}

func (z zipFile) Close() error { return z.f.Close() }

// openZip opens a window file through safeio: a FIFO or device in its
// place is refused instead of blocking or being read without end.
func openZip(path string) (zipFile, error) {
	f, st, err := safeio.Open(path)
	if err != nil {
		return zipFile{}, err
	}
	r, err := zip.NewReader(f, st.Size())
	if err != nil {
		f.Close()
		return zipFile{}, err
	}
	return zipFile{Reader: r, f: f}, nil
}

func decodeMeta(path string, z zipFile) (windowMeta, Sim3, error) {
	var m windowMeta
	f, err := z.Open("meta.json")
	if err != nil {
		return m, Sim3{}, fmt.Errorf("window file %s: %w", path, err)
	}
	defer f.Close()
	if err := json.NewDecoder(io.LimitReader(f, 16<<20)).Decode(&m); err != nil {
		return m, Sim3{}, fmt.Errorf("window file %s: meta.json: %w", path, err)
	}
	bad := func(format string, args ...any) (windowMeta, Sim3, error) {
		return m, Sim3{}, fmt.Errorf("window file %s: %s", path, fmt.Sprintf(format, args...))
	}
	w := m.Window
	switch {
	case m.Version != storeVersion:
		return bad("version %d (this da3-go reads %d)", m.Version, storeVersion)
	case w.Start < 0 || w.End <= w.Start || len(m.Frames) != w.Len() || len(m.Views) != w.Len() || len(m.Keys) != w.Len():
		return bad("window [%d, %d) with %d frame names, %d keys and %d views", w.Start, w.End, len(m.Frames), len(m.Keys), len(m.Views))
	case m.Width < 1 || m.Height < 1 || m.Width > 1<<14 || m.Height > 1<<14:
		return bad("map size %dx%d", m.Width, m.Height)
	}
	for _, v := range m.Views {
		if _, ok := units[v.Unit]; !ok {
			return bad("unknown depth unit %q", v.Unit)
		}
	}
	s, err := m.ToWorld.sim3()
	if err != nil {
		return bad("to_world: %v", err)
	}
	return m, s, nil
}

// readWindow reads a whole window file and checks every array against meta.json. The arrays of reuse
// (a previous storedWindow's, or nil) are decoded into when they are large enough.
func readWindow(path string, reuse map[string]any) (*storedWindow, error) {
	z, err := openZip(path)
	if err != nil {
		return nil, fmt.Errorf("window file %s: %w", path, err)
	}
	defer z.Close()
	m, s, err := decodeMeta(path, z)
	if err != nil {
		return nil, err
	}
	r := &arrayReader{path: path, z: z, meta: &m, reuse: reuse, arrays: map[string]any{}}
	a, err := r.readAll()
	if err != nil {
		return nil, err
	}
	out := &storedWindow{meta: m, toWorld: s, results: make([]model.Result, len(m.Views)), arrays: r.arrays}
	for i := range m.Views {
		out.results[i] = a.result(&m, i)
	}
	return out, nil
}

// arrayReader reads a window file's arrays, each checked against its digest in meta.json.
type arrayReader struct {
	path  string
	z     zipFile
	meta  *windowMeta
	reuse map[string]any
	// arrays are the decoded arrays by name, errs the errors of the reads so far.
	arrays map[string]any
	errs   []error
}

// windowArrays are a window file's arrays, decoded (conf, sky, rgb nil when the window has none).
type windowArrays struct {
	depth, conf, sky, penc []float32
	ext, ixt, ixo          []float64
	rgb                    []uint8
}

// readAll reads every array of the window file.
func (r *arrayReader) readAll() (windowArrays, error) {
	m := r.meta
	V, H, W := len(m.Views), m.Height, m.Width
	var a windowArrays
	var ok [8]bool
	a.depth, ok[0] = r.get(true, "depth", V, H, W).([]float32)
	a.conf, ok[1] = r.get(m.Conf, "conf", V, H, W).([]float32)
	a.sky, ok[2] = r.get(m.Sky, "sky", V, H, W).([]float32)
	a.penc, ok[3] = r.get(true, "pose_encoding", V, 9).([]float32)
	a.ext, ok[4] = r.get(true, "extrinsics", V, 3, 4).([]float64)
	a.ixt, ok[5] = r.get(true, "intrinsics", V, 3, 3).([]float64)
	a.ixo, ok[6] = r.get(true, "intrinsics_original", V, 3, 3).([]float64)
	a.rgb, ok[7] = r.get(m.RGB, "image", V, H, W, 3).([]uint8)
	if err := errors.Join(r.errs...); err != nil {
		return a, err
	}
	if !ok[0] || !ok[1] && m.Conf || !ok[2] && m.Sky || !ok[3] || !ok[4] || !ok[5] || !ok[6] || !ok[7] && m.RGB {
		return a, fmt.Errorf("window file %s: an array has the wrong type (depth, conf, sky, pose_encoding float32; cameras float64; image uint8)", r.path)
	}
	return a, nil
}

// get reads array name when present (nil otherwise), recording its error.
func (r *arrayReader) get(present bool, name string, want ...int) any {
	if !present {
		return nil
	}
	d, err := r.read(name, want)
	r.errs = append(r.errs, err)
	r.arrays[name] = d
	return d
}

// read decodes array name, of shape want, checking it against its digest.
func (r *arrayReader) read(name string, want []int) (any, error) {
	path := r.path
	zf, err := r.z.Open(name + ".npy")
	if err != nil {
		return nil, fmt.Errorf("window file %s: %w", path, err)
	}
	defer zf.Close()
	sum, ok := r.meta.Arrays[name]
	if !ok {
		return nil, fmt.Errorf("window file %s: no checksum for %s", path, name)
	}
	h := sha256.New()
	f := io.TeeReader(zf, h)
	n := 1
	for _, d := range want {
		n *= d
	}
	data, shape, err := imgio.DecodeNPYReuse(f, n, r.reuse[name])
	if err != nil {
		return nil, fmt.Errorf("window file %s: %s: %w", path, name, err)
	}
	if _, err := io.Copy(io.Discard, f); err != nil {
		return nil, fmt.Errorf("window file %s: %s: %w", path, name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return nil, fmt.Errorf("window file %s: %s does not match its checksum (%w)", path, name, errCorrupt)
	}
	if fmt.Sprint(shape) != fmt.Sprint(want) {
		return nil, fmt.Errorf("window file %s: %s has shape %v, want %v", path, name, shape, want)
	}
	return data, nil
}

// result is view i's result: its parts of the maps (not copies) and its camera.
func (a *windowArrays) result(m *windowMeta, i int) model.Result {
	W, H, vm := m.Width, m.Height, m.Views[i]
	n := W * H
	c := &model.Camera{}
	for r := range 3 {
		copy(c.Extrinsics[r][:], a.ext[12*i+4*r:])
		copy(c.Intrinsics[r][:], a.ixt[9*i+3*r:])
		copy(c.IntrinsicsOriginal[r][:], a.ixo[9*i+3*r:])
	}
	copy(c.PoseEncoding[:], a.penc[9*i:])
	var img []uint8
	if a.rgb != nil {
		img = a.rgb[3*n*i : 3*n*(i+1) : 3*n*(i+1)]
	}
	return model.Result{Depth: viewPart(a.depth, i, n), Conf: viewPart(a.conf, i, n), Sky: viewPart(a.sky, i, n), RGB: img,
		Width: W, Height: H, ProcessedWidth: vm.ProcessedWidth, ProcessedHeight: vm.ProcessedHeight,
		OrigWidth: vm.OrigWidth, OrigHeight: vm.OrigHeight, Cropped: vm.Cropped, Unit: units[vm.Unit],
		NonFinite: vm.NonFinite, Camera: c}
}

// viewPart is view i's part of a map of k values per view (nil for a map the window has not).
func viewPart(d []float32, i, k int) []float32 {
	if d == nil {
		return nil
	}
	return d[i*k : (i+1)*k : (i+1)*k]
}

// aligned returns a window's result of one of its views moved into the run's world frame: depth scaled by
// the window's scale, the camera moved by its transform. The maps are copies when the scale is not 1.
func aligned(r model.Result, toWorld Sim3) model.Result {
	if toWorld == Identity() {
		return r // window 0: the run's frame, untouched
	}
	if toWorld.S != 1 {
		d := make([]float32, len(r.Depth))
		s := float32(toWorld.S)
		for i, x := range r.Depth {
			d[i] = x * s
		}
		r.Depth = d
	}
	if r.Camera != nil {
		c := *r.Camera
		c.Extrinsics = toWorld.Camera(c.Extrinsics)
		r.Camera = &c
	}
	return r
}

// alignInPlace is aligned that scales the depth map in place (a stored window's own copy).
func alignInPlace(r model.Result, toWorld Sim3) model.Result {
	if toWorld == Identity() {
		return r
	}
	s := float32(toWorld.S)
	for i := range r.Depth {
		r.Depth[i] *= s
	}
	c := *r.Camera
	c.Extrinsics = toWorld.Camera(c.Extrinsics)
	r.Camera = &c
	return r
}

// finite is x, or 0 for NaN and infinities (JSON has no such numbers).
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// errCorrupt is wrapped by the errors of window files whose arrays do not match their checksums.
var errCorrupt = errors.New("the file was altered or damaged")

// removeFile removes a file, ignoring a missing one.
func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
