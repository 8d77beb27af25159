package ggml

import (
	"fmt"
	"strconv"
	"strings"
)

// ShapeError is the panic value of an op whose operands violate ggml's shape or
// type preconditions. It is raised in Go before C is called, because a failed
// GGML_ASSERT aborts the whole process. It is a programmer error; backend.Run
// recovers it and returns it as an error.
type ShapeError struct {
	Op     string  // the ggml op, e.g. "mul_mat"
	Shapes [][]int // the operand shapes in ggml order
	Msg    string
	Err    error // the underlying cause, if any (ErrClosed for use after Close)
}

// Unwrap returns the cause (ErrClosed for an op on a closed context).
func (e *ShapeError) Unwrap() error { return e.Err }

func (e *ShapeError) Error() string {
	var b strings.Builder
	b.WriteString("ggml ")
	b.WriteString(e.Op)
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if len(e.Shapes) > 0 {
		b.WriteString(" (shapes")
		for _, s := range e.Shapes {
			fmt.Fprintf(&b, " %v", s)
		}
		b.WriteString(")")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func itoa(i int) string { return strconv.Itoa(i) }

func shapeErr(op, msg string, ts ...*Tensor) *ShapeError {
	e := &ShapeError{Op: op, Msg: msg}
	for _, t := range ts {
		if t == nil {
			e.Shapes = append(e.Shapes, nil)
			continue
		}
		e.Shapes = append(e.Shapes, t.ne4())
	}
	return e
}

func mustf(ok bool, op string, ts []*Tensor, format string, args ...any) {
	if !ok {
		panic(shapeErr(op, fmt.Sprintf(format, args...), ts...))
	}
}

// notNil panics unless every operand is a usable handle: not nil and not
// from a closed context.
func notNil(op string, ts ...*Tensor) {
	for i, t := range ts {
		if t == nil || t.p == nil {
			panic(&ShapeError{Op: op, Msg: fmt.Sprintf("operand %d is nil", i)})
		}
		if t.closed() {
			panic(&ShapeError{Op: op, Msg: fmt.Sprintf("operand %d belongs to a closed context", i), Err: ErrClosed})
		}
	}
}

// canRepeat mirrors ggml_can_repeat(a, b): b's dims are multiples of a's.
func canRepeat(a, b *Tensor) bool {
	if a.isEmpty() {
		return b.isEmpty()
	}
	for i := 0; i < 4; i++ {
		if a.ne(i) == 0 || b.ne(i)%a.ne(i) != 0 {
			return false
		}
	}
	return true
}

func sameShape(a, b *Tensor) bool {
	for i := 0; i < 4; i++ {
		if a.ne(i) != b.ne(i) {
			return false
		}
	}
	return true
}

// normShape turns a shape of 1–4 dims into ne[4], checking it.
func normShape(op string, shape []int) [4]int64 {
	if len(shape) == 0 || len(shape) > 4 {
		panic(&ShapeError{Op: op, Shapes: [][]int{shape}, Msg: fmt.Sprintf("need 1 to 4 dims, got %d", len(shape))})
	}
	ne := [4]int64{1, 1, 1, 1}
	for i, d := range shape {
		if d < 0 {
			panic(&ShapeError{Op: op, Shapes: [][]int{shape}, Msg: "negative dimension"})
		}
		ne[i] = int64(d)
	}
	return ne
}

// rowsContiguous reports whether the elements of each row are adjacent
// (nb0 is the type size), which most CPU kernels assert.
func (t *Tensor) rowsContiguous() bool {
	return t.nb(0) == int64(t.Type().TypeSize())
}

// denseRows reports whether rows and rows of a plane are adjacent (nb0 is
// the type size and nb1 = ne0·nb0): the CPU im2col reads planes as arrays.
func (t *Tensor) denseRows() bool {
	return t.rowsContiguous() && (t.ne(1) == 1 || t.nb(1) == t.ne(0)*t.nb(0))
}

func isFloat(t Type) bool { return t == TypeF32 || t == TypeF16 || t == TypeBF16 }
