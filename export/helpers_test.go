package export_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/export"
)

// scene returns two 8×6 views of a slanted plane: view 0 at the world origin, view 1 turned 10° about y
// and moved right, with confidence growing along each row, a colour ramp, and an original image of
// 16×12 (twice the maps' size).
func scene() []export.View {
	const w, h = 8, 6
	k := [3][3]float64{{10, 0, 4}, {0, 11, 3}, {0, 0, 1}}
	ang := 10 * math.Pi / 180
	c, s := math.Cos(ang), math.Sin(ang)
	exts := [][3][4]float64{
		{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}},
		{{c, 0, -s, -0.3}, {0, 1, 0, 0.05}, {s, 0, c, 0.1}},
	}
	views := make([]export.View, len(exts))
	for vi, e := range exts {
		v := export.View{Name: fmt.Sprintf("img%d.jpg", vi), Width: w, Height: h,
			Depth: make([]float32, w*h), Conf: make([]float32, w*h), RGB: make([]uint8, 3*w*h),
			Camera:    &export.Camera{Extrinsics: e, Intrinsics: k, IntrinsicsOriginal: [3][3]float64{{20, 0, 8}, {0, 22, 6}, {0, 0, 1}}},
			OrigWidth: 2 * w, OrigHeight: 2 * h}
		for y := range h {
			for x := range w {
				i := y*w + x
				v.Depth[i] = float32(2 + 0.1*float64(x) + 0.05*float64(y) + 0.3*float64(vi))
				v.Conf[i] = float32(1 + 0.05*float64(x) + 0.01*float64(y) + 0.02*float64(vi))
				v.RGB[3*i], v.RGB[3*i+1], v.RGB[3*i+2] = uint8(30*x), uint8(40*y), uint8(100+50*vi)
			}
		}
		views[vi] = v
	}
	return views
}

// keepAll selects every pixel with a valid depth.
func keepAll() export.Options {
	return export.Options{ConfThreshold: math.Inf(-1), ConfPercentile: 0, EnsurePercentile: 100, SkyThreshold: 0.3}
}

// project maps a world point into a view: pixel (u, v) and depth.
func project(v *export.View, p [3]float64) (u, w, d float64) {
	e, k := v.Camera.Extrinsics, v.Camera.Intrinsics
	var c [3]float64
	for i := range 3 {
		c[i] = e[i][0]*p[0] + e[i][1]*p[1] + e[i][2]*p[2] + e[i][3]
	}
	return (k[0][0]*c[0] + k[0][1]*c[1] + k[0][2]*c[2]) / c[2], (k[1][1]*c[1] + k[1][2]*c[2]) / c[2], c[2]
}

// plyFile is a PLY read by an independent parser of binary little-endian vertex-only files.
type plyFile struct {
	props []string // "type name"
	rows  [][]float64
}

func readPLY(t *testing.T, path string) *plyFile {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	end := bytes.Index(b, []byte("end_header\n"))
	require.Positive(t, end, "no end_header")
	lines := strings.Split(string(b[:end]), "\n")
	require.Equal(t, "ply", lines[0])
	require.Equal(t, "format binary_little_endian 1.0", lines[1])
	f := &plyFile{}
	n := -1
	for _, l := range lines[2:] {
		fs := strings.Fields(l)
		switch {
		case len(fs) == 0 || fs[0] == "comment":
		case fs[0] == "element":
			require.Equal(t, "vertex", fs[1])
			n, err = strconv.Atoi(fs[2])
			require.NoError(t, err)
		case fs[0] == "property":
			require.Len(t, fs, 3)
			f.props = append(f.props, fs[1]+" "+fs[2])
		default:
			t.Fatalf("unexpected header line %q", l)
		}
	}
	data := b[end+len("end_header\n"):]
	size := 0
	for _, p := range f.props {
		size += map[string]int{"float": 4, "uchar": 1}[strings.Fields(p)[0]]
	}
	require.Equal(t, n*size, len(data), "payload size")
	for i := range n {
		rec := data[i*size:]
		var row []float64
		for _, p := range f.props {
			if strings.HasPrefix(p, "float") {
				row = append(row, float64(math.Float32frombits(binary.LittleEndian.Uint32(rec))))
				rec = rec[4:]
			} else {
				row = append(row, float64(rec[0]))
				rec = rec[1:]
			}
		}
		f.rows = append(f.rows, row)
	}
	return f
}

// glbFile is a GLB read by an independent parser: its JSON and binary chunk.
type glbFile struct {
	doc struct {
		Scenes []struct {
			Nodes  []int
			Extras struct {
				HFAlignment [4][4]float64 `json:"hf_alignment"`
			}
		}
		Nodes []struct {
			Name string
			Mesh int
		}
		Meshes []struct {
			Name       string
			Primitives []struct {
				Attributes map[string]int
				Indices    *int
				Mode       int
			}
		}
		Accessors []struct {
			BufferView, ByteOffset, ComponentType, Count int
			Normalized                                   bool
			Type                                         string
			Min, Max                                     []float64
		}
		BufferViews []struct{ Buffer, ByteOffset, ByteLength, Target int }
		Buffers     []struct{ ByteLength int }
	}
	bin []byte
}

func readGLB(t *testing.T, path string) *glbFile {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b), 20)
	require.Equal(t, "glTF", string(b[:4]))
	require.Equal(t, uint32(2), binary.LittleEndian.Uint32(b[4:]))
	require.Equal(t, uint32(len(b)), binary.LittleEndian.Uint32(b[8:]), "total length")
	jl := int(binary.LittleEndian.Uint32(b[12:]))
	require.Equal(t, "JSON", string(b[16:20]))
	require.Zero(t, jl%4, "JSON chunk padded to 4")
	g := &glbFile{}
	require.NoError(t, json.Unmarshal(b[20:20+jl], &g.doc))
	rest := b[20+jl:]
	if len(rest) > 0 {
		bl := int(binary.LittleEndian.Uint32(rest))
		require.Equal(t, "BIN\x00", string(rest[4:8]))
		require.Equal(t, len(rest)-8, bl)
		require.Zero(t, bl%4)
		g.bin = rest[8:]
	}
	return g
}

// floats reads a float32 VEC3 accessor; bytes reads a uint8 VEC4 accessor.
func (g *glbFile) floats(t *testing.T, acc int) []float32 {
	a := g.doc.Accessors[acc]
	require.Equal(t, 5126, a.ComponentType)
	require.Equal(t, "VEC3", a.Type)
	bv := g.doc.BufferViews[a.BufferView]
	require.Equal(t, 12*a.Count, bv.ByteLength)
	require.Zero(t, bv.ByteOffset%4)
	out := make([]float32, 3*a.Count)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(g.bin[bv.ByteOffset+4*i:]))
	}
	return out
}

func (g *glbFile) bytes(t *testing.T, acc int) []uint8 {
	a := g.doc.Accessors[acc]
	require.Equal(t, 5121, a.ComponentType)
	require.True(t, a.Normalized)
	require.Equal(t, "VEC4", a.Type)
	bv := g.doc.BufferViews[a.BufferView]
	require.Equal(t, 4*a.Count, bv.ByteLength)
	return g.bin[bv.ByteOffset : bv.ByteOffset+bv.ByteLength]
}
