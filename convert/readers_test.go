package convert

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenSafetensors(t *testing.T) {
	vals := []float32{0.5, -1.25, 3, 1e-3, -7.5, 65504}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	writeSafetensors(t, path, []stTensor{
		{"b.f16", "F16", []int64{2, 3}, vals},
		{"a.f32", "F32", []int64{3, 2}, vals},
		{"c.bf16", "BF16", []int64{6}, vals},
		{"d.f64", "F64", []int64{1, 6}, vals},
		{"e.scalar", "F32", []int64{}, vals[:1]},
	})
	c, err := OpenSafetensors(path)
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, []string{"b.f16", "a.f32", "c.bf16", "d.f64", "e.scalar"}, c.Names(), "data order")

	wantBF16 := make([]float32, len(vals))
	for i, v := range vals {
		wantBF16[i] = math.Float32frombits(math.Float32bits(v) &^ 0xffff) // truncation, as encoded
	}
	wantF16 := make([]float32, len(vals))
	for i, v := range vals {
		wantF16[i] = f16ToF32(f32ToF16(v))
	}
	for _, tc := range []struct {
		name  string
		dtype DType
		shape []int64
		want  []float32
	}{
		{"a.f32", DTypeF32, []int64{3, 2}, vals},
		{"b.f16", DTypeF16, []int64{2, 3}, wantF16},
		{"c.bf16", DTypeBF16, []int64{6}, wantBF16},
		{"d.f64", DTypeF64, []int64{1, 6}, vals},
		{"e.scalar", DTypeF32, []int64{}, vals[:1]},
	} {
		tn, ok := c.Tensor(tc.name)
		require.True(t, ok, tc.name)
		assert.Equal(t, tc.dtype, tn.DType, tc.name)
		assert.Equal(t, tc.shape, tn.Shape, tc.name)
		got, err := tn.Float32s()
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close is idempotent")
}

func TestOpenSafetensorsHostile(t *testing.T) {
	good := buildSafetensors(t, []stTensor{{"w", "F32", []int64{2, 2}, []float32{1, 2, 3, 4}}})
	header := func(js string) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
		return append(append(b, js...), make([]byte, 16)...)
	}
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"huge header length", binary.LittleEndian.AppendUint64(nil, 1<<40), "exceeds"},
		{"header past EOF", append(binary.LittleEndian.AppendUint64(nil, 1000), "{}"...), "truncated"},
		{"truncated data", good[:len(good)-3], "outside"},
		{"not json", header("{nope"), "header"},
		{"not an object", header(`[1,2]`), "not a JSON object"},
		{"duplicate", header(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`), "duplicate"},
		{"bad dtype", header(`{"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}`), "unsupported dtype"},
		{"span mismatch", header(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`), "span"},
		{"negative offset", header(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`), "outside"},
		{"reversed offsets", header(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}}`), "outside"},
		{"offsets past data", header(`{"w":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}}`), "outside"},
		{"one offset", header(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}}`), "data_offsets"},
		{"negative dim", header(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`), "negative"},
		{"overflowing shape", header(`{"w":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,16]}}`), "overflow"},
		{"too many dims", header(`{"w":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}}`), "dimensions"},
		{"trailing garbage", header(`{} x`), "header"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "x.safetensors", tc.file)
			c, err := OpenSafetensors(path)
			require.Error(t, err)
			assert.Nil(t, c)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func FuzzReadSafetensors(f *testing.F) {
	f.Add(buildSafetensors(f, []stTensor{{"w", "F16", []int64{2, 2}, []float32{1, 2, 3, 4}}}))
	f.Add([]byte{8, 0, 0, 0, 0, 0, 0, 0, '{', '}'})
	f.Fuzz(func(t *testing.T, b []byte) {
		c := newCheckpoint()
		if err := readSafetensors(c, bytes.NewReader(b), int64(len(b))); err != nil {
			return
		}
		for _, n := range c.Names() {
			tn, _ := c.Tensor(n)
			if _, err := tn.Float32s(); err != nil {
				t.Fatalf("validated tensor %s unreadable: %v", n, err)
			}
		}
	})
}

// TestOpenPthTorchFile reads testdata/views.pth, written by torch 2.9:
//
//	base = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 8 - 0.5
//	sd = OrderedDict(module.t=base.t(), module.row=base[2], module.h=base.half(),
//	    module.b=base.bfloat16(), module.d=base.double()[1:, 1:],
//	    module.p=nn.Parameter(torch.full((2,), 3.0)), module.i=torch.tensor([7, -2]))
//	torch.save({"epoch": 3, "state_dict": sd, "args": {"lr": 0.1}}, "views.pth")
func TestOpenPthTorchFile(t *testing.T) {
	c, err := OpenPth(filepath.Join("testdata", "views.pth"))
	require.NoError(t, err)
	defer c.Close()
	base := make([]float32, 12)
	for i := range base {
		base[i] = float32(i)/8 - 0.5
	}
	cases := []struct {
		name  string
		dtype DType
		shape []int64
		want  []float32
	}{
		{"t", DTypeF32, []int64{4, 3}, []float32{-0.5, 0, 0.5, -0.375, 0.125, 0.625, -0.25, 0.25, 0.75, -0.125, 0.375, 0.875}},
		{"row", DTypeF32, []int64{4}, base[8:]},
		{"h", DTypeF16, []int64{3, 4}, base},
		{"b", DTypeBF16, []int64{3, 4}, base},
		{"d", DTypeF64, []int64{2, 3}, []float32{0.125, 0.25, 0.375, 0.625, 0.75, 0.875}},
		{"p", DTypeF32, []int64{2}, []float32{3, 3}},
		{"i", DTypeI64, []int64{2}, []float32{7, -2}},
	}
	names := make([]string, len(cases))
	for i, tc := range cases {
		names[i] = tc.name
	}
	assert.Equal(t, names, c.Names(), "state_dict found under its wrapper, module. prefix removed, order kept")
	for _, tc := range cases {
		tn, ok := c.Tensor(tc.name)
		require.True(t, ok, tc.name)
		assert.Equal(t, tc.dtype, tn.DType, tc.name)
		assert.Equal(t, tc.shape, tn.Shape, tc.name)
		got, err := tn.Float32s()
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
}

func TestOpenPthHandBuilt(t *testing.T) {
	w := []float32{1, 2, 3, 4, 5, 6}
	b := []float32{-1, -2}
	pkl, st := stateDictPickle([]pthTensor{{"w", []int{2, 3}, w}, {"b", []int{2}, b}})
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		path := writeFile(t, t.TempDir(), "m.pth", buildPth(t, pkl, st, method))
		c, err := OpenPth(path)
		require.NoError(t, err)
		assert.Equal(t, []string{"w", "b"}, c.Names())
		tw, _ := c.Tensor("w")
		got, err := tw.Float32s()
		require.NoError(t, err)
		assert.Equal(t, w, got)
		assert.Equal(t, []int64{2, 3}, tw.Shape)
		tb, _ := c.Tensor("b")
		got, err = tb.Float32s()
		require.NoError(t, err)
		assert.Equal(t, b, got)
		require.NoError(t, c.Close())
	}
}

// TestOpenPthNestedWrapper finds the state dict under {"model": ...}.
func TestOpenPthNestedWrapper(t *testing.T) {
	p := newPickle()
	p.op(opEmptyDict).put().op(opMark)
	p.str("optimizer").op(opEmptyDict)
	p.str("model").global("collections", "OrderedDict").op(opEmptyTuple, opReduce).op(opMark)
	p.str("x").tensor("0", "HalfStorage", 2, 0, []int{2}, []int{1})
	p.op(opSetItems)
	p.op(opSetItems, opStop)
	st := map[string][]byte{"0": encodeValues("F16", []float32{0.5, -2})}
	c, err := OpenPth(writeFile(t, t.TempDir(), "m.pth", buildPth(t, p.Bytes(), st, zip.Store)))
	require.NoError(t, err)
	defer c.Close()
	tn, ok := c.Tensor("x")
	require.True(t, ok)
	got, err := tn.Float32s()
	require.NoError(t, err)
	assert.Equal(t, []float32{0.5, -2}, got)
}

func TestOpenPthHostile(t *testing.T) {
	good, goodSt := stateDictPickle([]pthTensor{{"w", []int{2, 2}, []float32{1, 2, 3, 4}}})
	tensorPickle := func(numel, offset int, shape, strides []int) []byte {
		p := newPickle()
		p.op(opEmptyDict).op(opMark).str("w").tensor("0", "FloatStorage", numel, offset, shape, strides)
		return p.op(opSetItems, opStop).Bytes()
	}
	st4 := map[string][]byte{"0": encodeValues("F32", []float32{1, 2, 3, 4})}
	cases := []struct {
		name     string
		file     []byte
		want     string
		readWant string // error expected from Float32s instead of open
	}{
		{"not a zip", []byte("hello world"), "not a zip", ""},
		{"legacy pickle", []byte{0x80, 0x02, 'N', '.'}, "legacy", ""},
		{"truncated zip", buildPth(t, good, goodSt, zip.Store)[:60], "zip", ""},
		{"no data.pkl", func() []byte {
			var buf bytes.Buffer
			zw := zip.NewWriter(&buf)
			w, _ := zw.Create("archive/constants.pkl")
			w.Write([]byte{0x80, 2, 'N', '.'})
			zw.Close()
			return buf.Bytes()
		}(), "data.pkl", ""},
		{"unknown opcode", buildPth(t, []byte{0x80, 2, 'i', 'x', '\n'}, nil, zip.Store), "INST", ""},
		{"undefined opcode", buildPth(t, []byte{0x80, 2, 0xff}, nil, zip.Store), "0xff", ""},
		{"no stop", buildPth(t, []byte{0x80, 2, 'N'}, nil, zip.Store), "STOP", ""},
		{"stack underflow", buildPth(t, []byte{0x80, 2, 't', '.'}, nil, zip.Store), "MARK", ""},
		{"undefined memo", buildPth(t, []byte{0x80, 2, 'h', 9, '.'}, nil, zip.Store), "memo", ""},
		{"huge string", buildPth(t, []byte{0x80, 2, 'X', 0xff, 0xff, 0xff, 0x7f}, nil, zip.Store), "truncated", ""},
		{"setitems on int", buildPth(t, []byte{0x80, 2, 'K', 1, '(', 'K', 1, 'K', 2, 'u', '.'}, nil, zip.Store), "SETITEM", ""},
		{"no tensors", buildPth(t, []byte{0x80, 2, '}', '.'}, nil, zip.Store), "no state dict", ""},
		{"missing storage", buildPth(t, good, nil, zip.Store), "no entry", ""},
		{"short storage", buildPth(t, tensorPickle(8, 0, []int{8}, []int{1}), st4, zip.Store), "truncated", ""},
		{"view past storage", buildPth(t, tensorPickle(4, 2, []int{2, 2}, []int{2, 1}), st4, zip.Store), "", "outside"},
		{"strided view past storage", buildPth(t, tensorPickle(4, 0, []int{2, 2}, []int{1, 3}), st4, zip.Store), "", "outside"},
		{"more elements than storage", buildPth(t, tensorPickle(4, 0, []int{100, 100}, []int{0, 0}), st4, zip.Store), "", "storage only"},
		{"rank mismatch", buildPth(t, tensorPickle(4, 0, []int{2, 2}, []int{1}), st4, zip.Store), "rank", ""},
		{"bad storage type", buildPth(t, bytes.Replace(good, []byte("FloatStorage"), []byte("QInt8Storage"), 1), goodSt, zip.Store), "unsupported storage type torch.QInt8Storage", ""},
		{"storage key escapes", buildPth(t, bytes.Replace(good, []byte("X\x01\x00\x00\x000"), []byte("X\x01\x00\x00\x00/"), 1), goodSt, zip.Store), "storage key", ""},
		{"unknown object value", buildPth(t, func() []byte {
			p := newPickle()
			p.op(opEmptyDict).op(opMark).str("w").tensor("0", "FloatStorage", 4, 0, []int{4}, []int{1})
			p.str("q").global("torch._utils", "_rebuild_qtensor").op(opEmptyTuple, opReduce)
			return p.op(opSetItems, opStop).Bytes()
		}(), st4, zip.Store), "_rebuild_qtensor", ""},
		{"big endian", func() []byte {
			var buf bytes.Buffer
			zw := zip.NewWriter(&buf)
			w, _ := zw.Create("archive/data.pkl")
			w.Write(good)
			w, _ = zw.Create("archive/byteorder")
			w.Write([]byte("big"))
			zw.Close()
			return buf.Bytes()
		}(), "byte order", ""},
		{"self-referencing dict", buildPth(t, []byte{0x80, 2, '}', 'q', 0, '(', 'X', 1, 0, 0, 0, 'a', 'h', 0, 'X', 1, 0, 0, 0, 'b', 'h', 0, 'u', '.'}, nil, zip.Store), "no state dict", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "x.pth", tc.file)
			c, err := OpenPth(path)
			if tc.readWant == "" {
				require.Error(t, err)
				assert.Nil(t, c)
				assert.Contains(t, err.Error(), tc.want)
				return
			}
			require.NoError(t, err)
			defer c.Close()
			tn, ok := c.Tensor("w")
			require.True(t, ok)
			_, err = tn.Float32s()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.readWant)
		})
	}
}

func FuzzUnpickle(f *testing.F) {
	good, _ := stateDictPickle([]pthTensor{{"w", []int{2, 2}, []float32{1, 2, 3, 4}}})
	f.Add(good)
	f.Add([]byte{0x80, 2, '}', 'q', 0, '(', 'X', 1, 0, 0, 0, 'a', 'h', 0, 'u', '.'})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := unpickle(b)
		if err != nil {
			return
		}
		sd, err := findStateDict(v, 0, map[*pyDict]bool{})
		if err == nil && sd != nil {
			_ = stateDictNames(sd)
		}
		_ = describe(v)
	})
}

func TestPickleErrorsNameOpcode(t *testing.T) {
	_, err := unpickle([]byte{0x80, 2, 0x8f, '.'})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "EMPTY_SET"), err.Error())
}
