package loader

import (
	"errors"
	"fmt"
	"iter"
	"math"
)

// ErrKeyNotFound is returned (wrapped, naming the key) by the typed getters
// of KV when the key is absent.
var ErrKeyNotFound = errors.New("key not found")

// KVTypeError reports a metadata value of the wrong type (or out of range
// for the requested integer type). Want and Got are type names such as
// "uint32", "string", "[]int32".
type KVTypeError struct {
	Key  string
	Want string
	Got  string
}

func (e *KVTypeError) Error() string {
	return fmt.Sprintf("key %q: want %s, got %s", e.Key, e.Want, e.Got)
}

// KeyValue is one metadata entry.
type KeyValue struct {
	Key   string
	Value Value
}

// KV is ordered GGUF metadata with typed getters. Keys are unique.
type KV struct {
	entries []KeyValue
	index   map[string]int
}

// NewKV returns a KV holding the entries in order. It fails on an empty or
// duplicate key or an invalid (zero) Value.
func NewKV(entries []KeyValue) (*KV, error) {
	kv := &KV{entries: make([]KeyValue, 0, len(entries)), index: make(map[string]int, len(entries))}
	for _, e := range entries {
		if err := kv.add(e.Key, e.Value); err != nil {
			return nil, err
		}
	}
	return kv, nil
}

func (kv *KV) add(key string, v Value) error {
	if key == "" {
		return errors.New("empty metadata key")
	}
	if !v.set {
		return fmt.Errorf("key %q: invalid (zero) value", key)
	}
	if _, dup := kv.index[key]; dup {
		return fmt.Errorf("duplicate metadata key %q", key)
	}
	kv.index[key] = len(kv.entries)
	kv.entries = append(kv.entries, KeyValue{Key: key, Value: v})
	return nil
}

// Len returns the number of entries.
func (kv *KV) Len() int { return len(kv.entries) }

// Get returns the value of key.
func (kv *KV) Get(key string) (Value, bool) {
	i, ok := kv.index[key]
	if !ok {
		return Value{}, false
	}
	return kv.entries[i].Value, true
}

// All yields every entry in file order.
func (kv *KV) All() iter.Seq2[string, Value] {
	return func(yield func(string, Value) bool) {
		for _, e := range kv.entries {
			if !yield(e.Key, e.Value) {
				return
			}
		}
	}
}

// Entries returns a copy of the entries in file order (for copying metadata
// into Write).
func (kv *KV) Entries() []KeyValue { return append([]KeyValue(nil), kv.entries...) }

func (kv *KV) lookup(key string) (Value, error) {
	v, ok := kv.Get(key)
	if !ok {
		return Value{}, fmt.Errorf("key %q: %w", key, ErrKeyNotFound)
	}
	return v, nil
}

func typeErr(key, want string, v Value) error {
	return &KVTypeError{Key: key, Want: want, Got: v.goTypeName()}
}

func rangeErr(key, want string, v Value) error {
	return &KVTypeError{Key: key, Want: want, Got: fmt.Sprintf("%s %s (out of range)", v.goTypeName(), v.Short(8))}
}

// String returns a string value.
func (kv *KV) String(key string) (string, error) {
	v, err := kv.lookup(key)
	if err != nil {
		return "", err
	}
	s, ok := v.v.(string)
	if !ok || v.typ != ValueString {
		return "", typeErr(key, "string", v)
	}
	return s, nil
}

// Uint32 returns an integer value of any GGUF integer type that fits in a
// uint32 (writers differ in the width they use).
func (kv *KV) Uint32(key string) (uint32, error) {
	v, err := kv.lookup(key)
	if err != nil {
		return 0, err
	}
	if v.typ == ValueArray || !isInteger(v.typ) {
		return 0, typeErr(key, "uint32", v)
	}
	u, ok := asUint64(v.v)
	if !ok || u > math.MaxUint32 {
		return 0, rangeErr(key, "uint32", v)
	}
	return uint32(u), nil
}

// Uint64 returns a non-negative integer value of any GGUF integer type.
func (kv *KV) Uint64(key string) (uint64, error) {
	v, err := kv.lookup(key)
	if err != nil {
		return 0, err
	}
	if v.typ == ValueArray || !isInteger(v.typ) {
		return 0, typeErr(key, "uint64", v)
	}
	u, ok := asUint64(v.v)
	if !ok {
		return 0, rangeErr(key, "uint64", v)
	}
	return u, nil
}

// Int32 returns an integer value of any GGUF integer type that fits in an
// int32.
func (kv *KV) Int32(key string) (int32, error) {
	v, err := kv.lookup(key)
	if err != nil {
		return 0, err
	}
	if v.typ == ValueArray || !isInteger(v.typ) {
		return 0, typeErr(key, "int32", v)
	}
	i, ok := asInt64(v.v)
	if !ok || i < math.MinInt32 || i > math.MaxInt32 {
		return 0, rangeErr(key, "int32", v)
	}
	return int32(i), nil
}

// Float32 returns a float32 value; a float64 value is converted.
func (kv *KV) Float32(key string) (float32, error) {
	v, err := kv.lookup(key)
	if err != nil {
		return 0, err
	}
	switch x := v.v.(type) {
	case float32:
		return x, nil
	case float64:
		return float32(x), nil
	}
	return 0, typeErr(key, "float32", v)
}

// Bool returns a bool value.
func (kv *KV) Bool(key string) (bool, error) {
	v, err := kv.lookup(key)
	if err != nil {
		return false, err
	}
	b, ok := v.v.(bool)
	if !ok {
		return false, typeErr(key, "bool", v)
	}
	return b, nil
}

// Int32s returns a copy of an array of any integer type whose elements all
// fit in int32.
func (kv *KV) Int32s(key string) ([]int32, error) {
	v, err := kv.lookup(key)
	if err != nil {
		return nil, err
	}
	if v.typ != ValueArray || !isInteger(v.elem) {
		return nil, typeErr(key, "[]int32", v)
	}
	out := make([]int32, v.Len())
	for i := range out {
		x, ok := asInt64(arrayIndex(v.v, i))
		if !ok || x < math.MinInt32 || x > math.MaxInt32 {
			return nil, rangeErr(key, "[]int32", v)
		}
		out[i] = int32(x)
	}
	return out, nil
}

// Float32s returns a copy of an array of float32 (or float64, converted).
func (kv *KV) Float32s(key string) ([]float32, error) {
	v, err := kv.lookup(key)
	if err != nil {
		return nil, err
	}
	switch x := v.v.(type) {
	case []float32:
		return append([]float32{}, x...), nil
	case []float64:
		out := make([]float32, len(x))
		for i, f := range x {
			out[i] = float32(f)
		}
		return out, nil
	}
	return nil, typeErr(key, "[]float32", v)
}

// Strings returns a copy of an array of strings.
func (kv *KV) Strings(key string) ([]string, error) {
	v, err := kv.lookup(key)
	if err != nil {
		return nil, err
	}
	x, ok := v.v.([]string)
	if !ok {
		return nil, typeErr(key, "[]string", v)
	}
	return append([]string{}, x...), nil
}

// The ...Or getters return def when the key is absent or its value has the
// wrong type; use them only for genuinely optional keys and the error-
// returning getters for required ones.

// StringOr returns String(key), or def on error.
func (kv *KV) StringOr(key, def string) string { return or(kv.String, key, def) }

// Uint32Or returns Uint32(key), or def on error.
func (kv *KV) Uint32Or(key string, def uint32) uint32 { return or(kv.Uint32, key, def) }

// Int32Or returns Int32(key), or def on error.
func (kv *KV) Int32Or(key string, def int32) int32 { return or(kv.Int32, key, def) }

// Float32Or returns Float32(key), or def on error.
func (kv *KV) Float32Or(key string, def float32) float32 { return or(kv.Float32, key, def) }

// BoolOr returns Bool(key), or def on error.
func (kv *KV) BoolOr(key string, def bool) bool { return or(kv.Bool, key, def) }

func or[T any](get func(string) (T, error), key string, def T) T {
	x, err := get(key)
	if err != nil {
		return def
	}
	return x
}
