package convert

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// stTensor is a tensor for a synthetic safetensors file.
type stTensor struct {
	name  string
	dtype string // F32, F16, BF16, F64
	shape []int64
	data  []float32
}

func encodeValues(dtype string, data []float32) []byte {
	var b []byte
	for _, v := range data {
		switch dtype {
		case "F32":
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		case "F16":
			b = binary.LittleEndian.AppendUint16(b, f32ToF16(v))
		case "BF16":
			b = binary.LittleEndian.AppendUint16(b, uint16(math.Float32bits(v)>>16))
		case "F64":
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(v)))
		default:
			panic("dtype " + dtype)
		}
	}
	return b
}

// buildSafetensors encodes tensors as a safetensors file image.
func buildSafetensors(t testing.TB, ts []stTensor) []byte {
	t.Helper()
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for _, x := range ts {
		raw := encodeValues(x.dtype, x.data)
		hdr[x.name] = map[string]any{"dtype": x.dtype, "shape": x.shape, "data_offsets": []int{len(data), len(data) + len(raw)}}
		data = append(data, raw...)
	}
	js, err := json.Marshal(hdr)
	require.NoError(t, err)
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	out = append(out, js...)
	return append(out, data...)
}

func writeSafetensors(t testing.TB, path string, ts []stTensor) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, buildSafetensors(t, ts), 0o644))
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// randValues returns n deterministic pseudo-random values in [-1, 1).
func randValues(seed uint64, n int64) []float32 {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.Float64()*2 - 1)
	}
	return out
}

// pk builds pickle streams the way torch.save does (protocol 2).
type pk struct {
	bytes.Buffer
	memo int
}

func newPickle() *pk {
	p := &pk{}
	p.WriteByte(opProto)
	p.WriteByte(2)
	return p
}

func (p *pk) op(b ...byte) *pk { p.Write(b); return p }

func (p *pk) put() *pk {
	p.op(opBinPut, byte(p.memo))
	p.memo++
	return p
}

func (p *pk) str(s string) *pk {
	p.WriteByte(opBinUnicode)
	p.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(s))))
	p.WriteString(s)
	return p
}

func (p *pk) int(n int) *pk {
	if n >= 0 && n < 256 {
		return p.op(opBinInt1, byte(n))
	}
	p.WriteByte(opBinInt)
	p.Write(binary.LittleEndian.AppendUint32(nil, uint32(int32(n))))
	return p
}

func (p *pk) global(mod, name string) *pk {
	p.WriteByte(opGlobal)
	p.WriteString(mod + "\n" + name + "\n")
	return p
}

func (p *pk) ints(xs []int) *pk {
	p.op(opMark)
	for _, x := range xs {
		p.int(x)
	}
	return p.op(opTuple)
}

// tensor emits _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict()).
func (p *pk) tensor(key, storageType string, numel, offset int, shape, strides []int) *pk {
	p.global("torch._utils", "_rebuild_tensor_v2")
	p.op(opMark)
	p.op(opMark).str("storage").global("torch", storageType).str(key).str("cpu").int(numel).op(opTuple)
	p.op(opBinPersID)
	p.int(offset).ints(shape).ints(strides).op(opNewFalse)
	p.global("collections", "OrderedDict").op(opEmptyTuple, opReduce)
	p.op(opTuple, opReduce)
	return p
}

// pthTensor is one tensor of a hand-built state dict, contiguous in its own
// storage.
type pthTensor struct {
	name  string
	shape []int
	data  []float32
}

// stateDictPickle pickles an OrderedDict of contiguous F32 tensors stored
// in storages "0", "1", ... and returns the pickle and the storages.
func stateDictPickle(ts []pthTensor) ([]byte, map[string][]byte) {
	p := newPickle()
	p.global("collections", "OrderedDict").op(opEmptyTuple, opReduce).put()
	p.op(opMark)
	st := map[string][]byte{}
	for i, x := range ts {
		key := strconv.Itoa(i)
		strides := make([]int, len(x.shape))
		s := 1
		for d := len(x.shape) - 1; d >= 0; d-- {
			strides[d] = s
			s *= x.shape[d]
		}
		p.str(x.name).tensor(key, "FloatStorage", len(x.data), 0, x.shape, strides)
		st[key] = encodeValues("F32", x.data)
	}
	p.op(opSetItems, opStop)
	return p.Bytes(), st
}

// buildPth zips a pickle and its storages like torch.save ("archive/...").
func buildPth(t testing.TB, pkl []byte, storages map[string][]byte, method uint16) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, b []byte) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		require.NoError(t, err)
		_, err = w.Write(b)
		require.NoError(t, err)
	}
	add("archive/data.pkl", pkl)
	add("archive/byteorder", []byte("little"))
	for k, b := range storages {
		add("archive/data/"+k, b)
	}
	add("archive/version", []byte("3\n"))
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}
