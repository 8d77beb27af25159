package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/da3-go/da3-go/loader"
)

// halfFields are the byte offsets, within one block, of the half-precision
// scales of the quantized types the schema allows (ggml-common.h's block_*
// structs): the only values of a quantized block that can be NaN or Inf.
var halfFields = map[loader.Type][]int{
	loader.TypeQ4_0: {0}, loader.TypeQ4_1: {0, 2}, loader.TypeQ5_0: {0}, loader.TypeQ5_1: {0, 2},
	loader.TypeQ8_0: {0}, loader.TypeQ4K: {0, 2}, loader.TypeQ5K: {0, 2}, loader.TypeQ6K: {208},
}

// firstNonFinite returns the index of the first NaN or Inf element (for a
// quantized type: of the first block with a non-finite scale) in data of
// type t, or -1. It reads the bit patterns only: an all-ones exponent.
func firstNonFinite(t loader.Type, data []byte) int {
	switch t {
	case loader.TypeF32:
		// Two floats per word: u has a zero exponent field exactly where a
		// float has an all-ones exponent and the top bit of each lane clear,
		// so (u − 1…) & 0x8000… flags the zero lanes (a borrow out of a zero
		// low lane can flag the high one too, in a word already flagged).
		// Blocks of 8 words are OR-reduced without branches, then located.
		const exp, ones, high = 0x7f8000007f800000, 0x0080000000800000, 0x8000000080000000
		i := 0
		if n := len(data) / 8; n > 0 {
			words := unsafe.Slice((*uint64)(unsafe.Pointer(&data[0])), n)
			for ; i+8 <= n; i += 8 {
				f := uint64(0)
				for _, w := range words[i : i+8] {
					u := ^w & exp
					f |= (u - ones) & high
				}
				if f != 0 {
					break
				}
			}
			i *= 2
		}
		for ; 4*i+4 <= len(data); i++ {
			if binary.LittleEndian.Uint32(data[4*i:])&0x7f800000 == 0x7f800000 {
				return i
			}
		}
	case loader.TypeF16, loader.TypeBF16:
		mask := uint16(0x7c00)
		if t == loader.TypeBF16 {
			mask = 0x7f80
		}
		// Four halves per word: u has a zero lane exactly where a half has an
		// all-ones exponent, and no lane of u has its top bit set, so the
		// zero-lane test (u − 1…) & ^u & 0x8000… is exact.
		m4 := uint64(mask) * 0x0001000100010001
		i := 0
		if n := len(data) / 8; n > 0 {
			words := unsafe.Slice((*uint64)(unsafe.Pointer(&data[0])), n)
			for ; i < n; i++ {
				u := ^words[i] & m4
				if (u-0x0001000100010001)&^u&0x8000800080008000 != 0 {
					break
				}
			}
			i *= 4
		}
		for ; 2*i+2 <= len(data); i++ {
			if binary.LittleEndian.Uint16(data[2*i:])&mask == mask {
				return i
			}
		}
	default:
		fields, ok := halfFields[t]
		bs := t.TypeSize()
		if !ok || bs <= 0 {
			return -1
		}
		for b := 0; b+bs <= len(data); b += bs {
			for _, off := range fields {
				if binary.LittleEndian.Uint16(data[b+off:])&0x7c00 == 0x7c00 {
					return b / bs * t.BlockSize()
				}
			}
		}
	}
	return -1
}

// NonFiniteWeightsError lists the weight tensors holding NaN or Inf.
type NonFiniteWeightsError struct {
	// Tensors maps each tensor name to the index of its first non-finite
	// element.
	Tensors map[string]int
}

func (e *NonFiniteWeightsError) Error() string {
	names := make([]string, 0, len(e.Tensors))
	for n := range e.Tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	list := make([]string, 0, min(len(names), 4))
	for _, n := range names[:min(len(names), 4)] {
		list = append(list, fmt.Sprintf("%s (element %d)", n, e.Tensors[n]))
	}
	more := ""
	if len(names) > 4 {
		more = fmt.Sprintf(" and %d more", len(names)-4)
	}
	return fmt.Sprintf("%d weight tensor(s) hold NaN or Inf values: %s%s: the file is corrupt", len(names), strings.Join(list, ", "), more)
}

// checkFinite scans every tensor of f for non-finite values, on all cores.
// It reads the whole file (as the first run would) and costs about a
// memory pass over it.
func checkFinite(f *loader.File) error {
	infos := f.Tensors()
	var (
		mu   sync.Mutex
		bad  = map[string]int{}
		errs []error
		next = make(chan loader.TensorInfo)
		wg   sync.WaitGroup
	)
	for range max(1, runtime.NumCPU()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ti := range next {
				data, err := f.TensorData(ti.Name)
				if err == nil {
					if i := firstNonFinite(ti.Type, data); i >= 0 {
						mu.Lock()
						bad[ti.Name] = i
						mu.Unlock()
					}
					continue
				}
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	for _, ti := range infos {
		next <- ti
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return errList(errs)
	}
	if len(bad) > 0 {
		return &NonFiniteWeightsError{Tensors: bad}
	}
	return nil
}

// nonFinite reports whether x holds NaN or Inf.
func nonFinite(x []float32) bool {
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return true
		}
	}
	return false
}

// ErrNonFinite is wrapped by NonFiniteError.
var ErrNonFinite = errors.New("non-finite output")

// NonFiniteError reports outputs holding NaN or Inf (RunOptions.Strict).
type NonFiniteError struct {
	// Stage is the first stage whose values are not finite.
	Stage string
	// Outputs are the affected outputs ("view 0 depth", ...).
	Outputs []string
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("%s hold NaN or Inf values, first at stage %s", strings.Join(e.Outputs, ", "), e.Stage)
}

// Unwrap makes errors.Is(err, ErrNonFinite) hold.
func (e *NonFiniteError) Unwrap() error { return ErrNonFinite }

// checkOutputs verifies that every output of res is finite. When one is
// not, it runs the request again with every tap to name the first stage
// whose values are not finite, then records it in each Result (or returns
// a *NonFiniteError with opt.Strict).
func checkOutputs(res []Result, exec func(RunOptions) ([]Result, error), opt RunOptions) ([]Result, error) {
	var bad []string
	probe := ""
	for i, r := range res {
		if probe == "" {
			probe = r.probe
		}
		for _, o := range []struct {
			name string
			data []float32
		}{{"depth", r.Depth}, {"conf", r.Conf}, {"sky", r.Sky}} {
			if nonFinite(o.data) {
				bad = append(bad, fmt.Sprintf("view %d %s", i, o.name))
			}
		}
		if c := r.Camera; c != nil && nonFinite(c.PoseEncoding[:]) {
			bad = append(bad, fmt.Sprintf("view %d camera", i))
		}
	}
	if len(bad) == 0 && probe == "" {
		return res, nil
	}
	if len(bad) == 0 {
		// The outputs look finite only because a ReLU turned NaN into 0.
		bad = []string{"intermediate features (the outputs are not meaningful)"}
	}
	stage := locateNonFinite(exec, opt)
	switch {
	case stage != "":
	case probe != "":
		stage = probe
	default:
		stage = "output" // the final activations (exp of a huge logit)
	}
	if opt.Strict {
		return nil, &NonFiniteError{Stage: stage, Outputs: bad}
	}
	for i := range res {
		res[i].NonFinite = stage
	}
	return res, nil
}

// locateNonFinite runs the request with every tap and returns the first
// tap, in graph order, whose values are not finite ("" if none is).
func locateNonFinite(exec func(RunOptions) ([]Result, error), opt RunOptions) string {
	var order []string
	seen := map[string]bool{}
	o := opt
	o.Strict = false
	o.Taps = func(name string) bool {
		if !seen[name] {
			seen[name] = true
			order = append(order, name)
		}
		return true
	}
	res, err := exec(o)
	if err != nil || len(res) == 0 {
		return ""
	}
	for _, name := range order {
		if t, ok := res[0].Taps[name]; ok && nonFinite(t.Data) {
			return name
		}
	}
	return ""
}
