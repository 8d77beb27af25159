// Package bind fills the weight fields of layer structs from a model file's
// tensors by their `gguf` struct tags (ollama's tag scheme, made strict):
// a layer declares the names of its weights next to its fields, and a model
// binds its parts under their roots ("vit", "head", "cam").
package bind

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/da3-go/da3-go/ggml"
)

// Source resolves tensor names to weights (backend.Weights does).
type Source interface {
	Tensor(name string) *ggml.Tensor
}

// MissingError lists every required tensor a model file lacks.
type MissingError struct {
	Names []string
}

func (e *MissingError) Error() string {
	const show = 12
	names := e.Names
	more := ""
	if len(names) > show {
		more = fmt.Sprintf(" and %d more", len(names)-show)
		names = names[:show]
	}
	return fmt.Sprintf("model file lacks %d required tensors: %s%s", len(e.Names), strings.Join(names, ", "), more)
}

var tensorType = reflect.TypeOf((*ggml.Tensor)(nil))

// Struct fills the *ggml.Tensor fields of dst (a pointer to a struct) from src,
// resolving names from `gguf` struct tags under root:
//
//   - `gguf:"name"` appends a path segment; slices and arrays append the index.
//   - untagged struct, pointer and interface fields are transparent groupings;
//     an untagged *ggml.Tensor leaf takes its parent's path (LayerScale).
//   - `,optional` allows a missing tensor (the field stays nil); `,alt:other`
//     tries another name.
//   - nil pointer and nil interface fields are skipped: constructors decide
//     which optional parts a config has.
//
// It returns a *MissingError listing every required tensor not found.
func Struct(dst any, src Source, root string) error {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return errors.New("bind: dst must be a non-nil pointer")
	}
	b := &binder{src: src, bound: map[string]bool{}}
	b.walk(v.Elem(), root, tagOpts{})
	if len(b.missing) > 0 {
		sort.Strings(b.missing)
		return &MissingError{Names: b.missing}
	}
	return nil
}

// Names returns the tensor names Struct resolves for dst under root,
// whether or not src has them (for diagnostics and tests).
func Names(dst any, root string) []string {
	b := &binder{src: nil, bound: map[string]bool{}}
	b.walk(reflect.ValueOf(dst).Elem(), root, tagOpts{})
	names := make([]string, 0, len(b.bound))
	for n := range b.bound {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

type tagOpts struct {
	optional bool
	alt      string
}

type binder struct {
	src     Source
	missing []string
	bound   map[string]bool
}

func join(path, seg string) string {
	switch {
	case seg == "":
		return path
	case path == "":
		return seg
	}
	return path + "." + seg
}

func parseTag(tag string) (name string, o tagOpts) {
	parts := strings.Split(tag, ",")
	name = parts[0]
	for _, p := range parts[1:] {
		switch {
		case p == "optional":
			o.optional = true
		case strings.HasPrefix(p, "alt:"):
			o.alt = strings.TrimPrefix(p, "alt:")
		}
	}
	return name, o
}

func (b *binder) walk(v reflect.Value, path string, o tagOpts) {
	switch {
	case v.Type() == tensorType:
		b.leaf(v, path, o)
	case v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface:
		if v.IsNil() {
			return
		}
		b.walk(v.Elem(), path, o)
	case v.Kind() == reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag, ok := f.Tag.Lookup("gguf")
			if !ok {
				// Untagged: only tensors, structs, pointers, interfaces, slices
				// take part (config fields are skipped).
				switch f.Type.Kind() {
				case reflect.Struct, reflect.Interface, reflect.Slice, reflect.Array:
				case reflect.Pointer:
					if f.Type != tensorType && f.Type.Elem().Kind() != reflect.Struct {
						continue
					}
				default:
					continue
				}
				if f.Type.Kind() == reflect.Struct && !hasTags(f.Type) {
					continue
				}
				b.walk(v.Field(i), path, o)
				continue
			}
			name, fo := parseTag(tag)
			if name == "-" {
				continue
			}
			alt := ""
			if fo.alt != "" {
				alt = join(path, fo.alt)
			}
			b.walk(v.Field(i), join(path, name), tagOpts{optional: fo.optional || o.optional, alt: alt})
		}
	case v.Kind() == reflect.Slice || v.Kind() == reflect.Array:
		for i := 0; i < v.Len(); i++ {
			b.walk(v.Index(i), join(path, strconv.Itoa(i)), o)
		}
	}
}

// hasTags reports whether a struct type has any gguf-tagged field or tensor
// leaves somewhere inside it.
func hasTags(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if _, ok := f.Tag.Lookup("gguf"); ok || f.Type == tensorType {
			return true
		}
		switch f.Type.Kind() {
		case reflect.Struct:
			if hasTags(f.Type) {
				return true
			}
		case reflect.Interface, reflect.Slice, reflect.Array:
			return true
		case reflect.Pointer:
			if f.Type.Elem().Kind() == reflect.Struct && hasTags(f.Type.Elem()) {
				return true
			}
		}
	}
	return false
}

func (b *binder) leaf(v reflect.Value, path string, o tagOpts) {
	b.bound[path] = true
	if b.src == nil {
		return
	}
	t := b.src.Tensor(path)
	if t == nil && o.alt != "" {
		t = b.src.Tensor(o.alt)
		if t != nil {
			b.bound[o.alt] = true
		}
	}
	if t == nil {
		if !o.optional {
			b.missing = append(b.missing, path)
		}
		return
	}
	v.Set(reflect.ValueOf(t))
}
