package convert

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// This file is a minimal pickle virtual machine: exactly what torch.save
// writes for state dicts (protocol 2, also the framing and STACK_GLOBAL of
// protocols 4/5). It never imports or calls anything. Globals are inert
// values; REDUCE of a known constructor (OrderedDict, tensor rebuilders)
// builds the matching Go value and any other call yields an opaque object,
// which is an error only if it ends up where a tensor is expected.

// Pickle values are nil (None), bool, int64, float64, string, []byte,
// pyTuple, *pyList, *pyDict, pyGlobal, *pyStorage, *pyTensor and *pyObject.
type (
	pyTuple  []any
	pyList   struct{ items []any }
	pyGlobal struct{ module, name string }
	pyObject struct{ class pyGlobal } // result of calling an unknown global
	pyDict   struct {
		keys  []any
		vals  []any
		index map[string]int // position of string keys
	}
	pyStorage struct {
		dtype DType
		key   string
		numel int64
	}
	pyTensor struct {
		st      *pyStorage
		offset  int64
		shape   []int64
		strides []int64
	}
	pyMark struct{}
)

func (g pyGlobal) String() string { return g.module + "." + g.name }

func (d *pyDict) set(k, v any) {
	if ks, ok := k.(string); ok {
		if i, ok := d.index[ks]; ok {
			d.vals[i] = v
			return
		}
		if d.index == nil {
			d.index = map[string]int{}
		}
		d.index[ks] = len(d.keys)
	}
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
}

func (d *pyDict) get(k string) (any, bool) {
	if i, ok := d.index[k]; ok {
		return d.vals[i], true
	}
	return nil, false
}

var storageTypes = map[string]DType{
	"FloatStorage": DTypeF32, "HalfStorage": DTypeF16, "BFloat16Storage": DTypeBF16,
	"DoubleStorage": DTypeF64, "LongStorage": DTypeI64, "IntStorage": DTypeI32,
	"ShortStorage": DTypeI16, "CharStorage": DTypeI8, "ByteStorage": DTypeU8,
	"BoolStorage": DTypeBool,
}

// pickle opcodes handled by the VM.
const (
	opMark           = '('
	opStop           = '.'
	opPop            = '0'
	opPopMark        = '1'
	opDup            = '2'
	opBinFloat       = 'G'
	opBinInt         = 'J'
	opBinInt1        = 'K'
	opBinInt2        = 'M'
	opNone           = 'N'
	opBinPersID      = 'Q'
	opReduce         = 'R'
	opBinString      = 'T'
	opShortBinString = 'U'
	opBinUnicode     = 'X'
	opAppend         = 'a'
	opBuild          = 'b'
	opGlobal         = 'c'
	opDict           = 'd'
	opEmptyDict      = '}'
	opAppends        = 'e'
	opBinGet         = 'h'
	opLongBinGet     = 'j'
	opList           = 'l'
	opEmptyList      = ']'
	opBinPut         = 'q'
	opLongBinPut     = 'r'
	opSetItem        = 's'
	opTuple          = 't'
	opEmptyTuple     = ')'
	opSetItems       = 'u'
	opBinBytes       = 'B'
	opShortBinBytes  = 'C'
	opProto          = 0x80
	opNewObj         = 0x81
	opTuple1         = 0x85
	opTuple2         = 0x86
	opTuple3         = 0x87
	opNewTrue        = 0x88
	opNewFalse       = 0x89
	opLong1          = 0x8a
	opShortBinUni    = 0x8c
	opBinUnicode8    = 0x8d
	opBinBytes8      = 0x8e
	opMemoize        = 0x94
	opFrame          = 0x95
	opStackGlobal    = 0x93
)

// opNames names opcodes the VM rejects, for clearer errors.
var opNames = map[byte]string{
	'I': "INT", 'L': "LONG", 'F': "FLOAT", 'S': "STRING", 'V': "UNICODE", 'P': "PERSID",
	'g': "GET", 'p': "PUT", 'i': "INST", 'o': "OBJ", 0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4",
	0x8b: "LONG4", 0x8f: "EMPTY_SET", 0x90: "ADDITEMS", 0x91: "FROZENSET", 0x92: "NEWOBJ_EX",
	0x96: "BYTEARRAY8", 0x97: "NEXT_BUFFER", 0x98: "READONLY_BUFFER",
}

// Bounds of the VM: a state dict's pickle stays far below them (a few
// thousand memo entries, a stack of a few dozen, tuples nested a few deep), a
// hostile one (a run of DUP, memo references appended forever, tuples nested
// millions deep for a recursive printer) meets them with an error.
const (
	maxPickleStack   = 1 << 20 // values on the stack
	maxPickleMarks   = 1 << 16 // open MARKs
	maxPickleMemo    = 1 << 20 // memo entries
	maxPickleObjects = 1 << 23 // values pushed in all (bounds what containers can hold)
	maxPickleDepth   = 64      // tuples nested in tuples
)

type unpickler struct {
	data   []byte
	pos    int
	stack  []any
	marks  []int
	memo   map[uint32]any
	pushed int
	// depths of the tuples built, keyed by their first element (each tuple
	// has a backing array of its own); a tuple's depth is 1 + its deepest
	// tuple item's.
	depths map[*any]int
}

// unpickle runs the VM over data and returns the value left by STOP.
func unpickle(data []byte) (any, error) {
	u := &unpickler{data: data, memo: map[uint32]any{}, depths: map[*any]int{}}
	v, err := u.run()
	if err != nil {
		return nil, fmt.Errorf("pickle: %w", err)
	}
	return v, nil
}

func (u *unpickler) take(n uint64) ([]byte, error) {
	if n > uint64(len(u.data)-u.pos) {
		return nil, fmt.Errorf("truncated: need %d bytes at offset %d, %d left", n, u.pos, len(u.data)-u.pos)
	}
	b := u.data[u.pos : u.pos+int(n)]
	u.pos += int(n)
	return b, nil
}

func (u *unpickler) u8() (uint64, error) {
	b, err := u.take(1)
	if err != nil {
		return 0, err
	}
	return uint64(b[0]), nil
}

func (u *unpickler) u16() (uint64, error) {
	b, err := u.take(2)
	if err != nil {
		return 0, err
	}
	return uint64(binary.LittleEndian.Uint16(b)), nil
}

func (u *unpickler) u32() (uint64, error) {
	b, err := u.take(4)
	if err != nil {
		return 0, err
	}
	return uint64(binary.LittleEndian.Uint32(b)), nil
}

func (u *unpickler) u64() (uint64, error) {
	b, err := u.take(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// line reads up to a newline (GLOBAL's text arguments).
func (u *unpickler) line() (string, error) {
	rest := u.data[u.pos:]
	i := strings.IndexByte(string(rest[:min(len(rest), 1024)]), '\n')
	if i < 0 {
		return "", fmt.Errorf("unterminated text argument at offset %d", u.pos)
	}
	u.pos += i + 1
	return string(rest[:i]), nil
}

// errLimit marks a pickle that meets one of the VM's bounds.
type errLimit struct{ what string }

func (e errLimit) Error() string {
	return "pickle exceeds the limit of " + e.what + " (not a state dict checkpoint)"
}

func (u *unpickler) push(v any) error {
	if len(u.stack) >= maxPickleStack {
		return errLimit{fmt.Sprintf("%d values on the stack", maxPickleStack)}
	}
	if u.pushed++; u.pushed > maxPickleObjects {
		return errLimit{fmt.Sprintf("%d values in all", maxPickleObjects)}
	}
	u.stack = append(u.stack, v)
	return nil
}

// tuple builds a tuple of items, within maxPickleDepth.
func (u *unpickler) tuple(items []any) (pyTuple, error) {
	t := pyTuple(items)
	if len(t) == 0 {
		return t, nil
	}
	d := 1
	for _, it := range t {
		if sub, ok := it.(pyTuple); ok && len(sub) > 0 {
			d = max(d, 1+u.depths[&sub[0]])
		}
	}
	if d > maxPickleDepth {
		return nil, errLimit{fmt.Sprintf("%d nested tuples", maxPickleDepth)}
	}
	u.depths[&t[0]] = d
	return t, nil
}

func (u *unpickler) memoize(idx uint32, v any) error {
	if _, ok := u.memo[idx]; !ok && len(u.memo) >= maxPickleMemo {
		return errLimit{fmt.Sprintf("%d memo entries", maxPickleMemo)}
	}
	u.memo[idx] = v
	return nil
}

func (u *unpickler) pop() (any, error) {
	if len(u.stack) == 0 || (len(u.marks) > 0 && len(u.stack) <= u.marks[len(u.marks)-1]) {
		return nil, fmt.Errorf("stack underflow at offset %d", u.pos)
	}
	v := u.stack[len(u.stack)-1]
	u.stack = u.stack[:len(u.stack)-1]
	return v, nil
}

func (u *unpickler) top() (any, error) {
	if len(u.stack) == 0 || (len(u.marks) > 0 && len(u.stack) <= u.marks[len(u.marks)-1]) {
		return nil, fmt.Errorf("empty stack at offset %d", u.pos)
	}
	return u.stack[len(u.stack)-1], nil
}

// popMark pops everything above the innermost MARK.
func (u *unpickler) popMark() ([]any, error) {
	if len(u.marks) == 0 {
		return nil, fmt.Errorf("no MARK on the stack at offset %d", u.pos)
	}
	m := u.marks[len(u.marks)-1]
	u.marks = u.marks[:len(u.marks)-1]
	items := append([]any(nil), u.stack[m:]...)
	u.stack = u.stack[:m]
	return items, nil
}

func (u *unpickler) str(n uint64) (string, error) {
	b, err := u.take(n)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("invalid UTF-8 string at offset %d", u.pos-len(b))
	}
	return string(b), nil
}

func (u *unpickler) run() (any, error) {
	for {
		at := u.pos
		opb, err := u.take(1)
		if err != nil {
			return nil, fmt.Errorf("missing STOP: %w", err)
		}
		op := opb[0]
		if err := u.step(op); err != nil {
			if err == errStop {
				v, err := u.pop()
				if err != nil {
					return nil, fmt.Errorf("STOP with an empty stack")
				}
				return v, nil
			}
			return nil, fmt.Errorf("opcode 0x%02x at offset %d: %w", op, at, err)
		}
	}
}

type stopError struct{}

func (stopError) Error() string { return "STOP" }

var errStop error = stopError{}

func (u *unpickler) step(op byte) error {
	switch op {
	case opStop:
		return errStop
	case opProto:
		v, err := u.u8()
		if err != nil {
			return err
		}
		if v > 5 {
			return fmt.Errorf("unsupported pickle protocol %d", v)
		}
	case opFrame:
		if _, err := u.u64(); err != nil {
			return err
		}
	case opMark:
		if len(u.marks) >= maxPickleMarks {
			return errLimit{fmt.Sprintf("%d open MARKs", maxPickleMarks)}
		}
		u.marks = append(u.marks, len(u.stack))
	case opPop:
		if len(u.marks) > 0 && len(u.stack) == u.marks[len(u.marks)-1] {
			u.marks = u.marks[:len(u.marks)-1] // POP of a MARK
			return nil
		}
		_, err := u.pop()
		return err
	case opPopMark:
		_, err := u.popMark()
		return err
	case opDup:
		v, err := u.top()
		if err != nil {
			return err
		}
		return u.push(v)
	case opNone:
		return u.push(nil)
	case opNewTrue:
		return u.push(true)
	case opNewFalse:
		return u.push(false)
	case opBinInt:
		v, err := u.u32()
		if err != nil {
			return err
		}
		return u.push(int64(int32(uint32(v))))
	case opBinInt1:
		v, err := u.u8()
		if err != nil {
			return err
		}
		return u.push(int64(v))
	case opBinInt2:
		v, err := u.u16()
		if err != nil {
			return err
		}
		return u.push(int64(v))
	case opLong1:
		n, err := u.u8()
		if err != nil {
			return err
		}
		if n > 8 {
			return fmt.Errorf("LONG1 of %d bytes does not fit in 64 bits", n)
		}
		b, err := u.take(n)
		if err != nil {
			return err
		}
		var v int64
		for i := len(b) - 1; i >= 0; i-- {
			v = v<<8 | int64(b[i])
		}
		if n > 0 && n < 8 && b[n-1]&0x80 != 0 { // sign-extend
			v -= 1 << (8 * n)
		}
		return u.push(v)
	case opBinFloat:
		b, err := u.take(8)
		if err != nil {
			return err
		}
		return u.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
	case opBinUnicode, opShortBinUni, opBinUnicode8:
		var n uint64
		var err error
		switch op {
		case opBinUnicode:
			n, err = u.u32()
		case opShortBinUni:
			n, err = u.u8()
		default:
			n, err = u.u64()
		}
		if err != nil {
			return err
		}
		s, err := u.str(n)
		if err != nil {
			return err
		}
		return u.push(s)
	case opBinString, opShortBinString:
		var n uint64
		var err error
		if op == opBinString {
			n, err = u.u32()
		} else {
			n, err = u.u8()
		}
		if err != nil {
			return err
		}
		b, err := u.take(n)
		if err != nil {
			return err
		}
		return u.push(string(b))
	case opBinBytes, opShortBinBytes, opBinBytes8:
		var n uint64
		var err error
		switch op {
		case opBinBytes:
			n, err = u.u32()
		case opShortBinBytes:
			n, err = u.u8()
		default:
			n, err = u.u64()
		}
		if err != nil {
			return err
		}
		b, err := u.take(n)
		if err != nil {
			return err
		}
		return u.push(append([]byte(nil), b...))
	case opEmptyTuple:
		return u.push(pyTuple{})
	case opTuple:
		items, err := u.popMark()
		if err != nil {
			return err
		}
		t, err := u.tuple(items)
		if err != nil {
			return err
		}
		return u.push(t)
	case opTuple1, opTuple2, opTuple3:
		n := int(op-opTuple1) + 1
		t := make(pyTuple, n)
		for i := n - 1; i >= 0; i-- {
			v, err := u.pop()
			if err != nil {
				return err
			}
			t[i] = v
		}
		t, err := u.tuple(t)
		if err != nil {
			return err
		}
		return u.push(t)
	case opEmptyList:
		return u.push(&pyList{})
	case opList:
		items, err := u.popMark()
		if err != nil {
			return err
		}
		return u.push(&pyList{items: items})
	case opEmptyDict:
		return u.push(&pyDict{})
	case opDict:
		items, err := u.popMark()
		if err != nil {
			return err
		}
		d := &pyDict{}
		if err := setItems(d, items); err != nil {
			return err
		}
		return u.push(d)
	case opAppend:
		v, err := u.pop()
		if err != nil {
			return err
		}
		return u.appendTo([]any{v})
	case opAppends:
		items, err := u.popMark()
		if err != nil {
			return err
		}
		return u.appendTo(items)
	case opSetItem:
		v, err := u.pop()
		if err != nil {
			return err
		}
		k, err := u.pop()
		if err != nil {
			return err
		}
		return u.setItemsOn([]any{k, v})
	case opSetItems:
		items, err := u.popMark()
		if err != nil {
			return err
		}
		return u.setItemsOn(items)
	case opBinPut, opLongBinPut:
		var idx uint64
		var err error
		if op == opBinPut {
			idx, err = u.u8()
		} else {
			idx, err = u.u32()
		}
		if err != nil {
			return err
		}
		v, err := u.top()
		if err != nil {
			return err
		}
		return u.memoize(uint32(idx), v)
	case opMemoize:
		v, err := u.top()
		if err != nil {
			return err
		}
		return u.memoize(uint32(len(u.memo)), v)
	case opBinGet, opLongBinGet:
		var idx uint64
		var err error
		if op == opBinGet {
			idx, err = u.u8()
		} else {
			idx, err = u.u32()
		}
		if err != nil {
			return err
		}
		v, ok := u.memo[uint32(idx)]
		if !ok {
			return fmt.Errorf("memo entry %d not defined", idx)
		}
		return u.push(v)
	case opGlobal:
		mod, err := u.line()
		if err != nil {
			return err
		}
		name, err := u.line()
		if err != nil {
			return err
		}
		return u.global(mod, name)
	case opStackGlobal:
		name, err := u.pop()
		if err != nil {
			return err
		}
		mod, err := u.pop()
		if err != nil {
			return err
		}
		ms, ok1 := mod.(string)
		ns, ok2 := name.(string)
		if !ok1 || !ok2 {
			return fmt.Errorf("STACK_GLOBAL needs two strings, got %T and %T", mod, name)
		}
		return u.global(ms, ns)
	case opReduce, opNewObj:
		args, err := u.pop()
		if err != nil {
			return err
		}
		fn, err := u.pop()
		if err != nil {
			return err
		}
		t, ok := args.(pyTuple)
		if !ok {
			return fmt.Errorf("call arguments are %T, want a tuple", args)
		}
		v, err := call(fn, t)
		if err != nil {
			return err
		}
		return u.push(v)
	case opBuild:
		// The state of an object (OrderedDict's _metadata, a Parameter's
		// attributes) carries nothing a converter needs: drop it.
		if _, err := u.pop(); err != nil {
			return err
		}
		if _, err := u.top(); err != nil {
			return err
		}
	case opBinPersID:
		pid, err := u.pop()
		if err != nil {
			return err
		}
		st, err := persistentLoad(pid)
		if err != nil {
			return err
		}
		return u.push(st)
	default:
		if name, ok := opNames[op]; ok {
			return fmt.Errorf("unsupported pickle opcode %s", name)
		}
		return fmt.Errorf("unknown pickle opcode 0x%02x", op)
	}
	return nil
}

// ErrNotCheckpoint marks a pickle that names a global no state dict holds:
// anything but the reconstruction helpers of torch, collections and numpy.
var ErrNotCheckpoint = errors.New("not a checkpoint")

// allowedGlobals are the globals of state dicts (and of the numpy arrays and
// dtypes training scripts sometimes save beside them); torch storage classes,
// dtypes and torch._utils._rebuild_* are allowed by global.
var allowedGlobals = map[string]bool{
	"collections.OrderedDict": true, "collections.defaultdict": true,
	"builtins.dict": true, "__builtin__.dict": true, "builtins.list": true, "builtins.tuple": true,
	"builtins.set": true, "builtins.frozenset": true, "builtins.bytearray": true,
	"torch._tensor._rebuild_from_type_v2": true, "torch.Tensor": true, "torch.Size": true,
	"torch.device": true, "torch.nn.parameter.Parameter": true,
	"numpy.core.multiarray._reconstruct": true, "numpy._core.multiarray._reconstruct": true,
	"numpy.core.multiarray.scalar": true, "numpy._core.multiarray.scalar": true,
	"numpy.ndarray": true, "numpy.dtype": true,
}

var torchDTypes = map[string]bool{
	"float32": true, "float": true, "float16": true, "half": true, "bfloat16": true, "float64": true,
	"double": true, "int64": true, "long": true, "int32": true, "int": true, "int16": true,
	"short": true, "int8": true, "uint8": true, "bool": true,
}

// global pushes the global module.name if a state dict may hold it, and
// refuses the pickle otherwise: nothing is ever imported or called, but a
// pickle naming os.system or builtins.eval is no checkpoint.
func (u *unpickler) global(module, name string) error {
	g := pyGlobal{module, name}
	ok := allowedGlobals[g.String()] ||
		(module == "torch._utils" && strings.HasPrefix(name, "_rebuild_")) ||
		(module == "torch" && (strings.HasSuffix(name, "Storage") || torchDTypes[name]))
	if !ok {
		return fmt.Errorf("%w: it names the global %.200s, which no state dict holds (only torch, collections and numpy reconstruction helpers)", ErrNotCheckpoint, g)
	}
	return u.push(g)
}

func (u *unpickler) appendTo(items []any) error {
	top, err := u.top()
	if err != nil {
		return err
	}
	switch l := top.(type) {
	case *pyList:
		l.items = append(l.items, items...)
	case *pyObject: // a list subclass we do not model: drop its items
	default:
		return fmt.Errorf("APPEND to %T", top)
	}
	return nil
}

func (u *unpickler) setItemsOn(items []any) error {
	top, err := u.top()
	if err != nil {
		return err
	}
	switch d := top.(type) {
	case *pyDict:
		return setItems(d, items)
	case *pyObject: // a dict subclass we do not model: drop its items
		return nil
	default:
		return fmt.Errorf("SETITEM on %T", top)
	}
}

func setItems(d *pyDict, items []any) error {
	if len(items)%2 != 0 {
		return fmt.Errorf("odd number (%d) of dict items", len(items))
	}
	for i := 0; i < len(items); i += 2 {
		switch items[i].(type) {
		case string, int64, bool, nil, float64, pyTuple:
		default:
			return fmt.Errorf("unhashable dict key of type %T", items[i])
		}
		d.set(items[i], items[i+1])
	}
	return nil
}

// call evaluates REDUCE/NEWOBJ for the constructors state dicts use.
func call(fn any, args pyTuple) (any, error) {
	g, ok := fn.(pyGlobal)
	if !ok {
		return nil, fmt.Errorf("call of a %T, not a global", fn)
	}
	switch g.String() {
	case "collections.OrderedDict", "builtins.dict", "__builtin__.dict":
		d := &pyDict{}
		if len(args) == 1 {
			l, ok := args[0].(*pyList)
			if !ok {
				return nil, fmt.Errorf("%s(%T) is not supported", g, args[0])
			}
			for _, it := range l.items {
				kv, ok := it.(pyTuple)
				if !ok || len(kv) != 2 {
					return nil, fmt.Errorf("%s item is not a pair", g)
				}
				if err := setItems(d, []any(kv)); err != nil {
					return nil, err
				}
			}
		} else if len(args) > 1 {
			return nil, fmt.Errorf("%s with %d arguments", g, len(args))
		}
		return d, nil
	case "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor":
		return rebuildTensor(args)
	case "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state":
		if len(args) < 1 {
			return nil, fmt.Errorf("%s without arguments", g)
		}
		if _, ok := args[0].(*pyTensor); !ok {
			return nil, fmt.Errorf("%s of a %T, not a tensor", g, args[0])
		}
		return args[0], nil
	case "torch._tensor._rebuild_from_type_v2":
		// (func, type, args, state): rebuild with func(*args), drop type/state.
		if len(args) != 4 {
			return nil, fmt.Errorf("%s with %d arguments, want 4", g, len(args))
		}
		inner, ok := args[2].(pyTuple)
		if !ok {
			return nil, fmt.Errorf("%s: arguments are %T, want a tuple", g, args[2])
		}
		return call(args[0], inner)
	}
	return &pyObject{class: g}, nil
}

// rebuildTensor evaluates _rebuild_tensor_v2(storage, storage_offset, size,
// stride, requires_grad, backward_hooks[, metadata]).
func rebuildTensor(args pyTuple) (any, error) {
	if len(args) < 4 {
		return nil, fmt.Errorf("_rebuild_tensor_v2 with %d arguments, want at least 4", len(args))
	}
	st, ok := args[0].(*pyStorage)
	if !ok {
		return nil, fmt.Errorf("tensor storage is a %T", args[0])
	}
	off, ok := args[1].(int64)
	if !ok || off < 0 {
		return nil, fmt.Errorf("invalid storage offset %v", args[1])
	}
	shape, err := intTuple(args[2], "size")
	if err != nil {
		return nil, err
	}
	strides, err := intTuple(args[3], "stride")
	if err != nil {
		return nil, err
	}
	if len(shape) != len(strides) {
		return nil, fmt.Errorf("size %v and stride %v differ in rank", shape, strides)
	}
	if len(shape) > maxDims {
		return nil, fmt.Errorf("tensor of %d dimensions (at most %d)", len(shape), maxDims)
	}
	return &pyTensor{st: st, offset: off, shape: shape, strides: strides}, nil
}

func intTuple(v any, what string) ([]int64, error) {
	t, ok := v.(pyTuple)
	if !ok {
		return nil, fmt.Errorf("tensor %s is a %T, want a tuple", what, v)
	}
	out := make([]int64, len(t))
	for i, x := range t {
		n, ok := x.(int64)
		if !ok || n < 0 {
			return nil, fmt.Errorf("tensor %s %v: element %d is not a non-negative int", what, t, i)
		}
		out[i] = n
	}
	return out, nil
}

// persistentLoad resolves torch's persistent id
// ('storage', storage_type, key, location, numel).
func persistentLoad(pid any) (*pyStorage, error) {
	t, ok := pid.(pyTuple)
	if !ok || len(t) != 5 {
		return nil, fmt.Errorf("persistent id %v is not a 5-tuple", pid)
	}
	if s, _ := t[0].(string); s != "storage" {
		return nil, fmt.Errorf("persistent id of kind %v, want 'storage'", t[0])
	}
	g, ok := t[1].(pyGlobal)
	if !ok || g.module != "torch" {
		return nil, fmt.Errorf("storage type %v is not a torch storage", t[1])
	}
	dt, ok := storageTypes[g.name]
	if !ok {
		return nil, fmt.Errorf("unsupported storage type torch.%s", g.name)
	}
	key, ok := t[2].(string)
	if !ok || key == "" || strings.ContainsAny(key, "/\\") || key == ".." || key == "." {
		return nil, fmt.Errorf("invalid storage key %v", t[2])
	}
	numel, ok := t[4].(int64)
	if !ok || numel < 0 {
		return nil, fmt.Errorf("invalid storage size %v", t[4])
	}
	return &pyStorage{dtype: dt, key: key, numel: numel}, nil
}
