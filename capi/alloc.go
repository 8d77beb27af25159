package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"sync"
	"unsafe"
)

// Every block the library hands out (buffers, strings, view arrays) is
// recorded until the caller frees it through da3go_free_buffer,
// da3go_free_string or da3go_free_views. A pointer that is not recorded
// (freed already, never returned by the library, or a view array freed with
// the wrong count) is not passed to free: the call logs a warning and does
// nothing, where free would corrupt the heap or crash.

type blockKind int

const (
	blockBuffer blockKind = iota // da3go_free_buffer
	blockString                  // da3go_free_string
	blockViews                   // da3go_free_views
)

func (k blockKind) String() string {
	return [...]string{"buffer", "string", "view array"}[k]
}

type block struct {
	kind blockKind
	n    int // views in a view array
}

var live = struct {
	sync.Mutex
	m map[uintptr]block
}{m: map[uintptr]block{}}

// track records p (malloc'd, not NULL) as handed out.
func track(p unsafe.Pointer, b block) {
	live.Lock()
	live.m[uintptr(p)] = b
	live.Unlock()
}

// untrack forgets p if it is a live block of that kind and returns it; ok is
// false (and nothing changes) otherwise.
func untrack(p unsafe.Pointer, kind blockKind) (b block, ok bool) {
	live.Lock()
	defer live.Unlock()
	b, ok = live.m[uintptr(p)]
	if !ok || b.kind != kind {
		return block{}, false
	}
	delete(live.m, uintptr(p))
	return b, true
}

// liveKind tells what p is, for warnings.
func liveKind(p unsafe.Pointer) string {
	live.Lock()
	defer live.Unlock()
	if b, ok := live.m[uintptr(p)]; ok {
		return "a " + b.kind.String() + " of this library"
	}
	return "freed already, or not returned by this library"
}

// cString is C.CString, tracked: the caller frees it with da3go_free_string.
func cString(s string) *C.char {
	p := C.CString(s)
	track(unsafe.Pointer(p), block{kind: blockString})
	return p
}

// freeTracked frees p if it is a live block of that kind, else warns.
func freeTracked(fn string, p unsafe.Pointer, kind blockKind) {
	if p == nil {
		return
	}
	if _, ok := untrack(p, kind); !ok {
		logger.Warn(fn+": pointer ignored, not a live "+kind.String()+" of this library", "pointer", uintptr(p), "it is", liveKind(p))
		return
	}
	C.free(p)
}
