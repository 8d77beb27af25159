package tests

// The hostile model corpus: mutated GGUF files built from the committed tiny
// fixtures, in the classes of mutation a broken download, a buggy converter
// or an attacker produces. TestHostileModels runs each through Load and one
// tiny Depth in process, FuzzLoadRun explores further from them, and
// TestHostileModelsSubprocess runs them through the built binary.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/ggml"
	"github.com/da3-go/da3-go/loader"
	"github.com/da3-go/da3-go/quantize"
)

// hostileCase is one mutated model file.
type hostileCase struct {
	name string
	// mustFail: Load (or the run) must return an error.
	mustFail bool
	// nonFinite: the weights overflow at run time; a run that succeeds
	// must report it.
	nonFinite bool
	build     func() []byte
}

// ggufModel is a parsed GGUF held in memory for structured mutations.
type ggufModel struct {
	kv      []loader.KeyValue
	tensors []ggufTensor
}

type ggufTensor struct {
	name  string
	typ   loader.Type
	shape []uint64
	data  []byte
}

func readModel(t testing.TB, path string) *ggufModel {
	t.Helper()
	f, err := loader.Open(path)
	require.NoError(t, err)
	defer f.Close()
	m := &ggufModel{kv: f.KV().Entries()}
	for _, ti := range f.Tensors() {
		d, err := f.TensorData(ti.Name)
		require.NoError(t, err)
		m.tensors = append(m.tensors, ggufTensor{ti.Name, ti.Type, ti.Shape, bytes.Clone(d)})
	}
	return m
}

func (m *ggufModel) clone() *ggufModel {
	c := &ggufModel{kv: slices.Clone(m.kv)}
	for _, t := range m.tensors {
		c.tensors = append(c.tensors, ggufTensor{t.name, t.typ, slices.Clone(t.shape), bytes.Clone(t.data)})
	}
	return c
}

// encode writes the model; the writer validates names, types and sizes, so
// mutations that break those are made on the bytes instead.
func (m *ggufModel) encode() []byte {
	var buf bytes.Buffer
	ts := make([]loader.WriterTensor, len(m.tensors))
	for i, t := range m.tensors {
		ts[i] = loader.WriterTensor{Name: t.name, Type: t.typ, Shape: t.shape, Data: loader.BytesTensor(t.data)}
	}
	if err := loader.Write(&buf, m.kv, ts, 0); err != nil {
		panic(fmt.Sprintf("hostile corpus: encode: %v", err))
	}
	return buf.Bytes()
}

func (m *ggufModel) tensor(name string) *ggufTensor {
	for i := range m.tensors {
		if m.tensors[i].name == name {
			return &m.tensors[i]
		}
	}
	return nil
}

func (m *ggufModel) setKV(key string, v loader.Value) {
	for i := range m.kv {
		if m.kv[i].Key == key {
			m.kv[i].Value = v
			return
		}
	}
	m.kv = append(m.kv, loader.KeyValue{Key: key, Value: v})
}

func (m *ggufModel) dropKV(key string) {
	m.kv = slices.DeleteFunc(m.kv, func(e loader.KeyValue) bool { return e.Key == key })
}

// retype gives tensor t the type typ and shape, with data of the right size
// (the old bytes repeated).
func (t *ggufTensor) retype(typ loader.Type, shape []uint64) {
	n, err := typ.ByteSize(shape)
	if err != nil {
		panic(err)
	}
	d := make([]byte, n)
	for i := range d {
		d[i] = t.data[i%len(t.data)]
	}
	t.typ, t.shape, t.data = typ, shape, d
}

func (t *ggufTensor) fill(v float32) {
	if t.typ != loader.TypeF32 {
		return
	}
	for i := 0; i+4 <= len(t.data); i += 4 {
		binary.LittleEndian.PutUint32(t.data[i:], math.Float32bits(v))
	}
}

// toHalf rounds f toward zero to IEEE half precision, flushing values
// below the normal range to zero (enough for weights of a test model).
func toHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	switch {
	case exp <= 0:
		return sign
	case exp >= 31:
		return sign | 0x7bff
	}
	return sign | uint16(exp)<<10 | uint16(b>>13&0x3ff)
}

// hostileBase is one valid model the corpus mutates.
type hostileBase struct {
	name string
	path string
	m    *ggufModel
	raw  []byte
	// dataEnd is the end of the last tensor's data (padding may follow).
	dataEnd int
	// kvCases: 0 none, 1 two mutations of each key, 2 every mutation.
	kvCases int
	// descriptorCases is the number of tensor descriptors corrupted.
	descriptorCases int
}

// hostileBases converts the tiny fixtures (and quantizes one) into the
// valid files the corpus starts from.
func hostileBases(t testing.TB) []hostileBase {
	t.Helper()
	dir := t.TempDir()
	conv := func(name, src string, opts convert.Options) string {
		p := filepath.Join(dir, name+".gguf")
		require.NoError(t, convert.Convert(context.Background(), src, p, opts))
		return p
	}
	da2 := readMeta(t, filepath.Join("fixtures", "da2-tiny", "meta.json"))
	type base struct {
		name, path string
		kv, desc   int
	}
	paths := []base{
		{"da3", conv("da3", filepath.Join("fixtures", "da3-tiny"), convert.Options{}), 2, 3},
		{"mono", conv("mono", filepath.Join("fixtures", "da3-tiny-mono"), convert.Options{}), 1, 3},
		{"da2", conv("da2", filepath.Join("fixtures", "da2-tiny", "model.pth"), convert.Options{Heads: int(da2["heads"].(float64)), OutLayers: metaInts(da2, "out_layers")}), 2, 3},
	}
	q := filepath.Join(dir, "da3-q8_0.gguf")
	_, err := quantize.Run(context.Background(), paths[0].path, q, ggml.TypeQ8_0, quantize.Options{Pure: true, Conv: ggml.TypeF16})
	require.NoError(t, err)
	paths = append(paths, base{"da3-q8_0", q, 1, 3})
	var out []hostileBase
	for _, p := range paths {
		raw, err := os.ReadFile(p.path)
		require.NoError(t, err)
		f, err := loader.Open(p.path)
		require.NoError(t, err)
		end := uint64(0)
		for _, ti := range f.Tensors() {
			end = max(end, ti.Offset+ti.Size)
		}
		f.Close()
		out = append(out, hostileBase{name: p.name, path: p.path, m: readModel(t, p.path), raw: raw, dataEnd: int(end),
			kvCases: p.kv, descriptorCases: p.desc})
	}
	return out
}

// sample picks up to n tensor names of the model spread over the file, and
// always the first tensor of each distinctive role.
func (m *ggufModel) sample(n int, keep func(t *ggufTensor) bool) []string {
	var names []string
	for i := range m.tensors {
		if keep(&m.tensors[i]) {
			names = append(names, m.tensors[i].name)
		}
	}
	if len(names) <= n {
		return names
	}
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, names[i*len(names)/n])
	}
	return out
}

func isMatrix(t *ggufTensor) bool { return len(t.shape) == 2 && t.shape[1] > 1 && t.shape[0] > 1 }
func isKernel(t *ggufTensor) bool { return len(t.shape) == 4 }

// hostileCorpus builds every case for the bases: a few hundred files.
func hostileCorpus(bases []hostileBase) []hostileCase {
	var cs []hostileCase
	for _, b := range bases {
		cs = append(cs, structuredCases(b)...)
		cs = append(cs, metadataCases(b)...)
		cs = append(cs, byteCases(b)...)
	}
	return cs
}

// mutate is a case made by editing a clone of the base model.
func mutate(b hostileBase, name string, mustFail bool, edit func(m *ggufModel)) hostileCase {
	return hostileCase{name: b.name + "/" + name, mustFail: mustFail, build: func() []byte {
		m := b.m.clone()
		edit(m)
		return m.encode()
	}}
}

// structuredCases: missing, wrong-shape, wrong-type and non-finite tensors.
func structuredCases(b hostileBase) []hostileCase {
	var cs []hostileCase
	all := func(*ggufTensor) bool { return true }
	for _, n := range b.m.sample(8, all) {
		cs = append(cs, mutate(b, "missing/"+n, true, func(m *ggufModel) {
			m.tensors = slices.DeleteFunc(m.tensors, func(t ggufTensor) bool { return t.name == n })
		}))
	}
	for _, n := range b.m.sample(3, func(t *ggufTensor) bool { return strings.HasSuffix(t.name, ".bias") }) {
		cs = append(cs, mutate(b, "missing-bias/"+n, true, func(m *ggufModel) {
			m.tensors = slices.DeleteFunc(m.tensors, func(t ggufTensor) bool { return t.name == n })
		}))
	}
	// Biases and norms of size 1 broadcast silently in ggml.
	for _, n := range b.m.sample(5, func(t *ggufTensor) bool { return len(t.shape) == 1 && t.shape[0] > 1 && t.typ == loader.TypeF32 }) {
		cs = append(cs, mutate(b, "size1/"+n, true, func(m *ggufModel) {
			t := m.tensor(n)
			t.shape, t.data = []uint64{1}, t.data[:4]
		}))
	}
	for _, n := range b.m.sample(3, func(t *ggufTensor) bool { return isMatrix(t) && t.shape[0] != t.shape[1] && t.typ == loader.TypeF32 }) {
		cs = append(cs, mutate(b, "transposed/"+n, true, func(m *ggufModel) {
			t := m.tensor(n)
			t.shape[0], t.shape[1] = t.shape[1], t.shape[0]
		}))
	}
	for _, n := range b.m.sample(3, func(t *ggufTensor) bool { return isKernel(t) }) {
		cs = append(cs, mutate(b, "kernel-4x2/"+n, true, func(m *ggufModel) {
			t := m.tensor(n)
			t.retype(t.typ, []uint64{4, 2, t.shape[2], t.shape[3]})
		}))
		cs = append(cs, mutate(b, "kernel-3d/"+n, true, func(m *ggufModel) {
			t := m.tensor(n)
			t.shape = []uint64{t.shape[0] * t.shape[1], t.shape[2], t.shape[3]}
		}))
	}
	for _, n := range b.m.sample(2, func(t *ggufTensor) bool { return isMatrix(t) && t.typ == loader.TypeF32 }) {
		cs = append(cs, mutate(b, "wide/"+n, true, func(m *ggufModel) {
			t := m.tensor(n)
			t.retype(t.typ, []uint64{t.shape[0] + 1, t.shape[1]})
		}))
		cs = append(cs, mutate(b, "rows/"+n, true, func(m *ggufModel) {
			t := m.tensor(n)
			t.retype(t.typ, []uint64{t.shape[0], t.shape[1] * 2})
		}))
	}
	// Types: integer weights crash ggml's kernels; vectors must be f32.
	for _, n := range b.m.sample(3, func(t *ggufTensor) bool { return isMatrix(t) || isKernel(t) }) {
		for _, typ := range []loader.Type{loader.TypeI32, loader.TypeI8, loader.TypeI16, loader.TypeF64, loader.TypeI64} {
			cs = append(cs, mutate(b, fmt.Sprintf("type-%s/%s", typ, n), true, func(m *ggufModel) {
				t := m.tensor(n)
				t.retype(typ, t.shape)
			}))
		}
	}
	for _, n := range b.m.sample(2, func(t *ggufTensor) bool { return isKernel(t) && t.shape[0]%32 == 0 }) {
		cs = append(cs, mutate(b, "type-q8_0-kernel/"+n, true, func(m *ggufModel) {
			t := m.tensor(n)
			t.retype(loader.TypeQ8_0, t.shape)
		}))
	}
	for _, n := range b.m.sample(2, func(t *ggufTensor) bool { return len(t.shape) == 1 && t.typ == loader.TypeF32 }) {
		for _, typ := range []loader.Type{loader.TypeF16, loader.TypeI32} {
			cs = append(cs, mutate(b, fmt.Sprintf("type-%s-vector/%s", typ, n), true, func(m *ggufModel) {
				t := m.tensor(n)
				t.retype(typ, t.shape)
			}))
		}
	}
	for _, n := range b.m.sample(1, func(t *ggufTensor) bool { return isMatrix(t) && t.typ == loader.TypeF32 }) {
		// A legal type change: the model must load and run.
		cs = append(cs, mutate(b, "type-f16-matrix/"+n, false, func(m *ggufModel) {
			t := m.tensor(n)
			h := make([]byte, len(t.data)/2)
			for i := range len(h) / 2 {
				binary.LittleEndian.PutUint16(h[2*i:], toHalf(math.Float32frombits(binary.LittleEndian.Uint32(t.data[4*i:]))))
			}
			t.typ, t.data = loader.TypeF16, h
		}))
	}
	cs = append(cs, mutate(b, "extra-tensor", true, func(m *ggufModel) {
		m.tensors = append(m.tensors, ggufTensor{"vit.blk.999.ls1", loader.TypeF32, []uint64{1}, make([]byte, 4)})
	}))
	// Non-finite weights: the file is corrupt.
	for _, n := range b.m.sample(4, func(t *ggufTensor) bool { return t.typ == loader.TypeF32 }) {
		for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
			cs = append(cs, mutate(b, fmt.Sprintf("nonfinite-%v/%s", v, n), true, func(m *ggufModel) { m.tensor(n).fill(v) }))
		}
	}
	// Finite but huge weights overflow at run time: the run must say so.
	for _, n := range b.m.sample(4, func(t *ggufTensor) bool { return t.typ == loader.TypeF32 && len(t.shape) > 1 }) {
		c := mutate(b, "huge/"+n, false, func(m *ggufModel) { m.tensor(n).fill(3e38) })
		c.nonFinite = true
		cs = append(cs, c)
	}
	return cs
}

// metadataCases: wrong KV types, absurd values and missing keys. Every key
// gets a wrong type and a deletion; with kvCases 2 the shape-deciding keys
// also get every absurd value and the others one.
func metadataCases(b hostileBase) []hostileCase {
	var cs []hostileCase
	if b.kvCases == 0 {
		return nil
	}
	// Keys whose loss or corruption must fail: the shape-deciding ones.
	critical := func(key string) bool {
		for _, s := range []string{".embed_dim", ".depth", ".num_heads", ".out_layers", ".features", ".out_channels", ".arch"} {
			if strings.HasSuffix(key, s) {
				return true
			}
		}
		return false
	}
	for _, e := range b.m.kv {
		key := e.Key
		if !strings.HasPrefix(key, "depthanything3.") {
			continue
		}
		crit := critical(key)
		cs = append(cs, mutate(b, "kv-string/"+key, crit && !strings.HasSuffix(key, ".arch"), func(m *ggufModel) {
			m.setKV(key, loader.ValueOf[string]("x"))
		}))
		cs = append(cs, mutate(b, "kv-missing/"+key, crit, func(m *ggufModel) { m.dropKV(key) }))
		if b.kvCases < 2 {
			continue
		}
		var values []loader.Value
		switch e.Value.Type() {
		case loader.ValueUint32:
			values = []loader.Value{loader.ValueOf[uint32](math.MaxInt32), loader.ValueOf[uint32](0), loader.ValueOf[uint32](math.MaxUint32), loader.ValueOf[float32](12.5)}
		case loader.ValueInt32:
			values = []loader.Value{loader.ValueOf[int32](math.MaxInt32), loader.ValueOf[int32](-2), loader.ValueOf[int32](math.MinInt32)}
		case loader.ValueFloat32:
			values = []loader.Value{loader.ValueOf[float32](float32(math.NaN())), loader.ValueOf[float32](float32(math.Inf(-1))), loader.ValueOf[float32](-1e30)}
		case loader.ValueArray:
			values = []loader.Value{loader.ArrayOf[int32]([]int32{0, 1, 2, math.MaxInt32}), loader.ArrayOf[int32]([]int32{1, 2, 3}),
				loader.ArrayOf[int32]([]int32{0, 1, 2, 3, 4}), loader.ArrayOf[int32]([]int32{-1, 0, 1, 2})}
		}
		if !crit && len(values) > 1 {
			values = values[:1]
		}
		for _, v := range values {
			cs = append(cs, mutate(b, fmt.Sprintf("kv-%s/%s", v.Short(4), key), crit, func(m *ggufModel) { m.setKV(key, v) }))
		}
	}
	cs = append(cs, mutate(b, "kv-arch-unknown", true, func(m *ggufModel) {
		m.setKV("depthanything3.arch", loader.ValueOf[string]("llama"))
	}))
	return cs
}

// byteCases: truncations, corrupted counts, sizes and types in the raw bytes.
func byteCases(b hostileBase) []hostileCase {
	var cs []hostileCase
	raw := b.raw
	edit := func(name string, mustFail bool, f func(p []byte) []byte) {
		cs = append(cs, hostileCase{name: b.name + "/" + name, mustFail: mustFail, build: func() []byte { return f(bytes.Clone(raw)) }})
	}
	for i := 1; i <= 16; i++ {
		n := len(raw) * i / 17
		if i <= 5 {
			n = i * 97 // inside the header
		}
		edit(fmt.Sprintf("truncate-%d", n), true, func(p []byte) []byte { return p[:n] })
	}
	edit("truncate-data-end", true, func(p []byte) []byte { return p[:b.dataEnd-1] })
	put64 := func(off int, v uint64) func(p []byte) []byte {
		return func(p []byte) []byte { binary.LittleEndian.PutUint64(p[off:], v); return p }
	}
	nt := binary.LittleEndian.Uint64(raw[8:])
	nkv := binary.LittleEndian.Uint64(raw[16:])
	for _, v := range []uint64{0, nt - 1, nt + 1, 2 * nt, 1 << 40, math.MaxUint64} {
		edit(fmt.Sprintf("tensor-count-%d", v), true, put64(8, v))
	}
	for _, v := range []uint64{0, nkv - 1, nkv + 1, 1 << 40, math.MaxUint64} {
		edit(fmt.Sprintf("kv-count-%d", v), true, put64(16, v))
	}
	// A key's string length, then a string value's length, claimed huge.
	for _, key := range []string{"general.architecture", "depthanything3.vit.out_layers"} {
		off := keyOffset(raw, key)
		if off < 0 {
			continue
		}
		for _, v := range []uint64{1 << 32, 1 << 62} {
			edit(fmt.Sprintf("key-length-%d/%s", v, key), true, put64(off-8, v))
		}
		valOff := off + len(key) + 4 // after the key and the value type
		for _, v := range []uint64{1 << 31, 1 << 62} {
			if key == "depthanything3.vit.out_layers" {
				// array: element type (4 bytes), then the count
				edit(fmt.Sprintf("array-length-%d", v), true, put64(valOff+4, v))
			} else {
				edit(fmt.Sprintf("string-length-%d", v), true, put64(valOff, v))
			}
		}
	}
	// Tensor descriptors: dims, type, offset.
	for _, name := range b.m.sample(b.descriptorCases, func(*ggufTensor) bool { return true }) {
		off := keyOffset(raw, name)
		if off < 0 {
			continue
		}
		d := off + len(name) // ndims
		nd := int(binary.LittleEndian.Uint32(raw[d:]))
		typeOff := d + 4 + 8*nd
		for _, v := range []uint32{0, 5, math.MaxUint32} {
			edit(fmt.Sprintf("ndims-%d/%s", v, name), true, func(p []byte) []byte { binary.LittleEndian.PutUint32(p[d:], v); return p })
		}
		for _, v := range []uint64{0, 1 << 31, 1 << 62} {
			edit(fmt.Sprintf("dim-%d/%s", v, name), true, put64(d+4, v))
		}
		for _, v := range []uint32{uint32(loader.TypeI32), uint32(loader.TypeI8), 4, 99, math.MaxUint32} {
			edit(fmt.Sprintf("dtype-%d/%s", v, name), true, func(p []byte) []byte { binary.LittleEndian.PutUint32(p[typeOff:], v); return p })
		}
		for _, v := range []uint64{1, 1 << 40, math.MaxUint64 - 7} {
			edit(fmt.Sprintf("offset-%d/%s", v, name), true, put64(typeOff+4, v))
		}
	}
	// Duplicated tensor: a name overwritten with another of the same length.
	if a, c := sameLengthNames(b.m); a != "" {
		edit("duplicate/"+c, true, func(p []byte) []byte {
			i := keyOffset(p, c)
			copy(p[i:], a)
			return p
		})
	}
	// Random flips in the header and in the data.
	hdr := headerEnd(b)
	r := rand.New(rand.NewPCG(1, uint64(len(raw))))
	for i := 0; i < 20; i++ {
		pos, bit := r.IntN(hdr), byte(1)<<r.IntN(8)
		edit(fmt.Sprintf("flip-header-%d", pos), false, func(p []byte) []byte { p[pos] ^= bit; return p })
	}
	for i := 0; i < 6; i++ {
		pos := hdr + r.IntN(len(raw)-hdr)
		edit(fmt.Sprintf("flip-data-%d", pos), false, func(p []byte) []byte { p[pos] = 0xff; return p })
	}
	return cs
}

// keyOffset finds a string field (u64 length, bytes) and returns the offset
// of its bytes, or -1.
func keyOffset(raw []byte, s string) int {
	pat := binary.LittleEndian.AppendUint64(nil, uint64(len(s)))
	pat = append(pat, s...)
	i := bytes.Index(raw, pat)
	if i < 0 {
		return -1
	}
	return i + 8
}

// headerEnd is the end of the last tensor descriptor.
func headerEnd(b hostileBase) int {
	last := b.m.tensors[len(b.m.tensors)-1]
	off := keyOffset(b.raw, last.name)
	return off + len(last.name) + 4 + 8*len(last.shape) + 4 + 8
}

func sameLengthNames(m *ggufModel) (a, b string) {
	seen := map[int]string{}
	for _, t := range m.tensors {
		if o, ok := seen[len(t.name)]; ok && strings.HasSuffix(t.name, ".bias") && strings.HasSuffix(o, ".bias") {
			return o, t.name
		}
		seen[len(t.name)] = t.name
	}
	return "", ""
}
