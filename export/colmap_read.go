package export

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/internal/safeio"
	"github.com/da3-go/da3-go/lens"
)

// ReadCOLMAP reads a COLMAP sparse model from dir: cameras, images and points3D, binary (.bin) when
// cameras.bin exists, else text (.txt). Files from other tools (COLMAP itself, pycolmap,
// read_write_model.py) are read as well; rigs and frames files, if present, are ignored. The reader is
// defensive: counts and lengths are checked against the file size before anything is allocated, and
// every error names the file and the record.
func ReadCOLMAP(dir string) (*COLMAPModel, error) {
	ext := ".bin"
	if _, err := os.Stat(filepath.Join(dir, "cameras.bin")); err != nil {
		if _, err2 := os.Stat(filepath.Join(dir, "cameras.txt")); err2 != nil {
			return nil, fmt.Errorf("read COLMAP model %s: neither cameras.bin nor cameras.txt found", dir)
		}
		ext = ".txt"
	}
	m := &COLMAPModel{}
	readers := []func(io.Reader, int64) error{m.readCamerasBin, m.readImagesBin, m.readPointsBin}
	if ext == ".txt" {
		readers = []func(io.Reader, int64) error{m.readCamerasText, m.readImagesText, m.readPointsText}
	}
	for i, name := range []string{"cameras", "images", "points3D"} {
		path := filepath.Join(dir, name+ext)
		if err := readFile(path, readers[i]); err != nil {
			return nil, fmt.Errorf("read COLMAP %s: %w", path, err)
		}
	}
	return m, nil
}

func readFile(path string, read func(io.Reader, int64) error) error {
	// safeio opens without blocking: a FIFO in the model's place is refused
	// at once (os.Open would wait for a writer before Stat could refuse it).
	f, st, err := safeio.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return read(bufio.NewReaderSize(f, 1<<16), st.Size())
}

// binReader reads little-endian values, tracking how many bytes remain so that counts can be bounded.
type binReader struct {
	r    io.Reader
	left int64
	buf  [8]byte
	err  error
}

func (b *binReader) read(n int) []byte {
	if b.err != nil {
		return make([]byte, n)
	}
	if int64(n) > b.left {
		b.err = io.ErrUnexpectedEOF
		return make([]byte, n)
	}
	if _, err := io.ReadFull(b.r, b.buf[:n]); err != nil {
		b.err = io.ErrUnexpectedEOF
	}
	b.left -= int64(n)
	return b.buf[:n]
}

func (b *binReader) u8() uint8    { return b.read(1)[0] }
func (b *binReader) u32() uint32  { return binary.LittleEndian.Uint32(b.read(4)) }
func (b *binReader) u64() uint64  { return binary.LittleEndian.Uint64(b.read(8)) }
func (b *binReader) f64() float64 { return math.Float64frombits(b.u64()) }

// f64s fills dst.
func (b *binReader) f64s(dst []float64) {
	for k := range dst {
		dst[k] = b.f64()
	}
}

// count reads a u64 count of records of at least minSize bytes each and checks it against the bytes left.
func (b *binReader) count(what string, minSize int64) (int, error) {
	n := b.u64()
	if b.err != nil {
		return 0, b.err
	}
	if n > uint64(b.left/minSize) {
		return 0, fmt.Errorf("%d %s declared, but only %d bytes follow", n, what, b.left)
	}
	return int(n), nil
}

// str reads a NUL-terminated string of at most 64 KiB.
func (b *binReader) str() (string, error) {
	var s []byte
	for b.err == nil {
		c := b.u8()
		if c == 0 {
			return string(s), b.err
		}
		if len(s) >= 1<<16 {
			return "", errors.New("image name longer than 64 KiB or not terminated")
		}
		s = append(s, c)
	}
	return "", b.err
}

func (m *COLMAPModel) readCamerasBin(r io.Reader, size int64) error {
	b := &binReader{r: r, left: size}
	n, err := b.count("cameras", 24)
	if err != nil {
		return err
	}
	m.Cameras = make([]COLMAPCamera, n)
	for i := range m.Cameras {
		c := &m.Cameras[i]
		c.ID, c.Model = b.u32(), CameraModel(int32(b.u32()))
		c.Width, c.Height = b.u64(), b.u64()
		if b.err != nil {
			return fmt.Errorf("camera %d: %w", i, b.err)
		}
		if !c.Model.valid() {
			return fmt.Errorf("camera %d: unknown model id %d", c.ID, int32(c.Model))
		}
		c.Params = make([]float64, c.Model.NumParams())
		b.f64s(c.Params)
		if b.err != nil {
			return fmt.Errorf("camera %d: %w", c.ID, b.err)
		}
	}
	return trailing(b)
}

func (m *COLMAPModel) readImagesBin(r io.Reader, size int64) error {
	b := &binReader{r: r, left: size}
	n, err := b.count("images", 4+7*8+4+1+8)
	if err != nil {
		return err
	}
	m.Images = make([]COLMAPImage, n)
	for i := range m.Images {
		im := &m.Images[i]
		im.ID = b.u32()
		b.f64s(im.Q[:])
		b.f64s(im.T[:])
		im.CameraID = b.u32()
		if im.Name, err = b.str(); err != nil {
			return fmt.Errorf("image %d: %w", i, err)
		}
		np, err := b.count("2D points", 24)
		if err != nil {
			return fmt.Errorf("image %d (%s): %w", im.ID, im.Name, err)
		}
		im.Points2D = make([]COLMAPPoint2D, np)
		for k := range im.Points2D {
			im.Points2D[k] = COLMAPPoint2D{X: b.f64(), Y: b.f64(), Point3DID: int64(b.u64())}
		}
		if b.err != nil {
			return fmt.Errorf("image %d (%s): %w", im.ID, im.Name, b.err)
		}
	}
	return trailing(b)
}

func (m *COLMAPModel) readPointsBin(r io.Reader, size int64) error {
	b := &binReader{r: r, left: size}
	n, err := b.count("points", 8+24+3+8+8)
	if err != nil {
		return err
	}
	m.Points = make([]COLMAPPoint3D, n)
	for i := range m.Points {
		p := &m.Points[i]
		p.ID = b.u64()
		b.f64s(p.XYZ[:])
		for k := range p.RGB {
			p.RGB[k] = b.u8()
		}
		p.Error = b.f64()
		nt, err := b.count("track elements", 8)
		if err != nil {
			return fmt.Errorf("point %d: %w", p.ID, err)
		}
		p.Track = make([]COLMAPTrackElement, nt)
		for k := range p.Track {
			p.Track[k] = COLMAPTrackElement{ImageID: b.u32(), Point2DIdx: b.u32()}
		}
		if b.err != nil {
			return fmt.Errorf("point %d: %w", p.ID, b.err)
		}
	}
	return trailing(b)
}

func trailing(b *binReader) error {
	if b.err != nil {
		return b.err
	}
	if b.left != 0 {
		return fmt.Errorf("%d unexpected bytes after the last record", b.left)
	}
	return nil
}

// textLines yields the trimmed lines of r with their line numbers; comments and blank lines are skipped
// unless raw is set for the next call (images.txt's points line may be blank).
type textLines struct {
	s    *bufio.Scanner
	line int
}

func newTextLines(r io.Reader) *textLines {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<16), 1<<30)
	return &textLines{s: s}
}

// next returns the next data line; raw returns the very next line, whatever it holds.
func (t *textLines) next(raw bool) (string, bool) {
	for t.s.Scan() {
		t.line++
		l := strings.TrimSpace(t.s.Text())
		if raw || (l != "" && l[0] != '#') {
			return l, true
		}
	}
	return "", false
}

// each calls fn with every data line and its fields until the input ends or fn fails.
func (t *textLines) each(fn func(line string, fields []string) error) error {
	for {
		l, ok := t.next(false)
		if !ok {
			return t.s.Err()
		}
		if err := fn(l, strings.Fields(l)); err != nil {
			return err
		}
	}
}

func (t *textLines) errorf(format string, args ...any) error {
	return fmt.Errorf("line %d: %s", t.line, fmt.Sprintf(format, args...))
}

func parseFloats(fields []string) ([]float64, error) {
	out := make([]float64, len(fields))
	for i, f := range fields {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out[i] = v
	}
	return out, nil
}

func parseUint(s string, bits int) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("bad integer %q", s)
	}
	return v, nil
}

func (m *COLMAPModel) readCamerasText(r io.Reader, _ int64) error {
	t := newTextLines(r)
	return t.each(func(l string, f []string) error {
		if len(f) < 4 {
			return t.errorf("camera line needs CAMERA_ID MODEL WIDTH HEIGHT PARAMS")
		}
		model, err := ParseCameraModel(f[1])
		if err != nil {
			return t.errorf("%v", err)
		}
		id, err1 := parseUint(f[0], 32)
		w, err2 := parseUint(f[2], 64)
		h, err3 := parseUint(f[3], 64)
		params, err4 := parseFloats(f[4:])
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return t.errorf("%v", err)
		}
		if len(params) != model.NumParams() {
			return t.errorf("camera %d: %v takes %d parameters, got %d", id, model, model.NumParams(), len(params))
		}
		m.Cameras = append(m.Cameras, COLMAPCamera{ID: uint32(id), Model: model, Width: w, Height: h, Params: params})
		return nil
	})
}

func (m *COLMAPModel) readImagesText(r io.Reader, _ int64) error {
	t := newTextLines(r)
	return t.each(func(l string, f []string) error {
		if len(f) < 10 {
			return t.errorf("image line needs IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME")
		}
		id, err1 := parseUint(f[0], 32)
		pose, err2 := parseFloats(f[1:8])
		cam, err3 := parseUint(f[8], 32)
		if err := errors.Join(err1, err2, err3); err != nil {
			return t.errorf("%v", err)
		}
		// The name is the rest of the line (it may contain spaces).
		name := strings.TrimSpace(l[fieldOffset(l, 9):])
		im := COLMAPImage{ID: uint32(id), CameraID: uint32(cam), Name: name}
		copy(im.Q[:], pose[:4])
		copy(im.T[:], pose[4:])
		pl, ok := t.next(true)
		if !ok {
			return t.errorf("image %d: missing the POINTS2D line", id)
		}
		pf := strings.Fields(pl)
		if len(pf)%3 != 0 {
			return t.errorf("image %d: POINTS2D has %d values, not a multiple of 3", id, len(pf))
		}
		im.Points2D = make([]COLMAPPoint2D, len(pf)/3)
		for k := range im.Points2D {
			xy, err := parseFloats(pf[3*k : 3*k+2])
			if err != nil {
				return t.errorf("image %d: %v", id, err)
			}
			pid, err := strconv.ParseInt(pf[3*k+2], 10, 64)
			if err != nil {
				return t.errorf("image %d: bad point id %q", id, pf[3*k+2])
			}
			im.Points2D[k] = COLMAPPoint2D{X: xy[0], Y: xy[1], Point3DID: pid}
		}
		m.Images = append(m.Images, im)
		return nil
	})
}

// fieldOffset returns the byte offset of the i-th whitespace-separated field of l.
func fieldOffset(l string, i int) int {
	in := false
	for j, c := range l {
		sp := c == ' ' || c == '\t'
		if !sp && !in {
			if i == 0 {
				return j
			}
			i--
		}
		in = !sp
	}
	return len(l)
}

func (m *COLMAPModel) readPointsText(r io.Reader, _ int64) error {
	t := newTextLines(r)
	return t.each(func(l string, f []string) error {
		if len(f) < 8 || (len(f)-8)%2 != 0 {
			return t.errorf("point line needs POINT3D_ID X Y Z R G B ERROR and (IMAGE_ID, POINT2D_IDX) pairs")
		}
		id, err := parseUint(f[0], 64)
		if err != nil {
			return t.errorf("%v", err)
		}
		xyz, err := parseFloats(f[1:4])
		if err != nil {
			return t.errorf("point %d: %v", id, err)
		}
		p := COLMAPPoint3D{ID: id}
		copy(p.XYZ[:], xyz)
		for k := range 3 {
			c, err := parseUint(f[4+k], 8)
			if err != nil {
				return t.errorf("point %d: %v", id, err)
			}
			p.RGB[k] = uint8(c)
		}
		e, err := parseFloats(f[7:8])
		if err != nil {
			return t.errorf("point %d: %v", id, err)
		}
		p.Error = e[0]
		for k := 8; k < len(f); k += 2 {
			im, err1 := parseUint(f[k], 32)
			idx, err2 := parseUint(f[k+1], 32)
			if err := errors.Join(err1, err2); err != nil {
				return t.errorf("point %d: %v", id, err)
			}
			p.Track = append(p.Track, COLMAPTrackElement{ImageID: uint32(im), Point2DIdx: uint32(idx)})
		}
		m.Points = append(m.Points, p)
		return nil
	})
}

// PosedImage is one image's camera from a COLMAP model.
type PosedImage struct {
	Name          string
	Extrinsics    [3][4]float64 // world-to-camera [R | t]
	Intrinsics    [3][3]float64 // in pixels of the COLMAP camera, Width × Height
	Width, Height int
	// Distorted reports a camera model with distortion (or a non-perspective projection) that the pinhole
	// Intrinsics leave out.
	Distorted bool
	// Lens is the camera's model when it is Distorted and package lens implements it (nil otherwise).
	Lens *lens.Camera
}

// Poses returns the cameras of the images called names, in that order, for pose-conditioned runs. An
// image matches a name exactly or, failing that, by base name. It fails when the model and names have
// different counts, or a name is missing or matches two images.
func (m *COLMAPModel) Poses(names []string) ([]PosedImage, error) {
	if len(names) != len(m.Images) {
		return nil, fmt.Errorf("COLMAP model has %d images, but %d input images were given", len(m.Images), len(names))
	}
	cams := map[uint32]*COLMAPCamera{}
	for i := range m.Cameras {
		cams[m.Cameras[i].ID] = &m.Cameras[i]
	}
	byName, byBase := map[string][]int{}, map[string][]int{}
	for i, im := range m.Images {
		byName[im.Name] = append(byName[im.Name], i)
		byBase[filepath.Base(im.Name)] = append(byBase[filepath.Base(im.Name)], i)
	}
	out := make([]PosedImage, len(names))
	used := map[int]string{}
	for j, n := range names {
		idx := byName[n]
		if len(idx) == 0 {
			idx = byBase[filepath.Base(n)]
		}
		switch {
		case len(idx) == 0:
			return nil, fmt.Errorf("input %s: no image of that name in the COLMAP model", n)
		case len(idx) > 1:
			return nil, fmt.Errorf("input %s: %d images of the COLMAP model have that name", n, len(idx))
		}
		if prev, dup := used[idx[0]]; dup {
			return nil, fmt.Errorf("inputs %s and %s match the same COLMAP image %s", prev, n, m.Images[idx[0]].Name)
		}
		used[idx[0]] = n
		im := &m.Images[idx[0]]
		c, ok := cams[im.CameraID]
		if !ok {
			return nil, fmt.Errorf("COLMAP image %s: camera %d not in the model", im.Name, im.CameraID)
		}
		k, distorted, err := c.Intrinsics()
		if err != nil {
			return nil, err
		}
		if c.Width == 0 || c.Height == 0 || c.Width > 1<<20 || c.Height > 1<<20 {
			return nil, fmt.Errorf("COLMAP camera %d: invalid size %dx%d", c.ID, c.Width, c.Height)
		}
		out[j] = PosedImage{Name: im.Name, Extrinsics: im.Extrinsics(), Intrinsics: k, Width: int(c.Width), Height: int(c.Height), Distorted: distorted}
		if lm := lens.Model(c.Model); distorted && lm.Supported() {
			l, err := lens.New(lm, int(c.Width), int(c.Height), c.Params)
			if err != nil {
				return nil, fmt.Errorf("COLMAP camera %d: %w", c.ID, err)
			}
			if l.IsPinhole() { // all distortion parameters zero: the pinhole matrix is the camera
				out[j].Distorted = false
			} else {
				out[j].Lens = l
			}
		}
	}
	return out, nil
}
