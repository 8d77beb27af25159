package testutil

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// specFormat is the format tag of the checkpoint specs that
// scripts/validate_gpu.py spec writes.
const specFormat = "da3-validate-spec-v1"

// Spec describes a checkpoint by the statistics of its tensors, as
// `scripts/validate_gpu.py spec` writes it: per tensor its dtype and shape,
// and either its values (tensors of at most 16 elements, and integer ones)
// or the mean and standard deviation of its values; plus the safetensors
// metadata. The random-weight checkpoints of tests/oracle draw every tensor
// from a normal law, so a spec of some kilobytes stands for a model of
// hundreds of megabytes.
type Spec struct {
	Format   string                `json:"format"`
	Metadata map[string]string     `json:"metadata"`
	Tensors  map[string]SpecTensor `json:"tensors"`
}

// SpecTensor is one tensor of a Spec.
type SpecTensor struct {
	DType  string    `json:"dtype"`
	Shape  []int64   `json:"shape"`
	Values []float64 `json:"values,omitempty"`
	Mean   float64   `json:"mean"`
	Std    float64   `json:"std"`
}

// specSizes are the element sizes of the dtypes SynthSafetensors writes.
var specSizes = map[string]int64{"F32": 4, "F64": 8, "I32": 4, "I64": 8}

// ReadSpec reads and checks a checkpoint spec.
func ReadSpec(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("spec %s: %w", path, err)
	}
	if s.Format != specFormat {
		return nil, fmt.Errorf("spec %s: format %q, want %q", path, s.Format, specFormat)
	}
	for name, t := range s.Tensors {
		size, ok := specSizes[t.DType]
		if !ok {
			return nil, fmt.Errorf("spec %s: tensor %q: dtype %s not supported", path, name, t.DType)
		}
		if t.DType[0] == 'I' && t.Values == nil {
			return nil, fmt.Errorf("spec %s: tensor %q: an integer tensor needs its values", path, name)
		}
		if t.Values != nil && int64(len(t.Values)) != t.elems() {
			return nil, fmt.Errorf("spec %s: tensor %q: %d values for shape %v", path, name, len(t.Values), t.Shape)
		}
		if t.elems() < 0 || t.elems() > 1<<40/size {
			return nil, fmt.Errorf("spec %s: tensor %q: shape %v", path, name, t.Shape)
		}
	}
	return &s, nil
}

func (t SpecTensor) elems() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		if d < 0 {
			return -1
		}
		n *= d
	}
	return n
}

// WriteSafetensors writes a checkpoint of s's layout to path: the verbatim
// tensors exactly, every other tensor normal values of its mean and standard
// deviation drawn from a generator seeded by seed and the tensor's name
// (CRC-32), so a tensor's values do not depend on the others. The values are
// deterministic but not those of validate_gpu.py synth (another generator).
func (s *Spec) WriteSafetensors(path string, seed uint64) error {
	names := make([]string, 0, len(s.Tensors))
	for n := range s.Tensors {
		names = append(names, n)
	}
	slices.Sort(names)
	header := map[string]any{}
	if len(s.Metadata) > 0 {
		header["__metadata__"] = s.Metadata
	}
	var off int64
	for _, n := range names {
		t := s.Tensors[n]
		size := t.elems() * specSizes[t.DType]
		header[n] = map[string]any{"dtype": t.DType, "shape": t.Shape, "data_offsets": []int64{off, off + size}}
		off += size
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = binary.Write(w, binary.LittleEndian, uint64(len(hb)))
	if err == nil {
		_, err = w.Write(hb)
	}
	var buf []byte
	for _, n := range names {
		if err != nil {
			break
		}
		buf = s.Tensors[n].appendValues(buf[:0], n, seed)
		_, err = w.Write(buf)
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// appendValues appends t's little-endian data to b.
func (t SpecTensor) appendValues(b []byte, name string, seed uint64) []byte {
	n := t.elems()
	value := func(i int64) float64 { return t.Values[i] }
	if t.Values == nil {
		r := rand.New(rand.NewPCG(seed, uint64(crc32.ChecksumIEEE([]byte(name)))))
		value = func(int64) float64 { return float64(float32(r.NormFloat64())*float32(t.Std) + float32(t.Mean)) }
	}
	for i := range n {
		v := value(i)
		switch t.DType {
		case "F32":
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v)))
		case "F64":
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		case "I32":
			b = binary.LittleEndian.AppendUint32(b, uint32(int32(v)))
		case "I64":
			b = binary.LittleEndian.AppendUint64(b, uint64(int64(v)))
		}
	}
	return b
}

// SynthCheckpoint writes the checkpoint of the spec at path (see
// Spec.WriteSafetensors) as model.safetensors in dir, with seed 0. It stops
// the test on failure.
func SynthCheckpoint(t testing.TB, spec, dir string) {
	t.Helper()
	s, err := ReadSpec(spec)
	require.NoError(t, err)
	require.NoError(t, s.WriteSafetensors(filepath.Join(dir, "model.safetensors"), 0))
}
