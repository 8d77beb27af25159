package sysmem

import (
	"syscall"
	"unsafe"
)

var globalMemoryStatusEx = syscall.NewLazyDLL("kernel32.dll").NewProc("GlobalMemoryStatusEx")

// memoryStatusEx is MEMORYSTATUSEX.
type memoryStatusEx struct {
	length, memoryLoad                       uint32
	totalPhys, availPhys                     uint64
	totalPageFile, availPageFile             uint64
	totalVirtual, availVirtual, availExtVirt uint64
}

// limits is the physical memory available (GlobalMemoryStatusEx), Windows'
// counterpart of Linux's MemAvailable; nil when the call fails.
func limits() []Limit {
	ms := memoryStatusEx{length: uint32(unsafe.Sizeof(memoryStatusEx{}))}
	if r, _, _ := globalMemoryStatusEx.Call(uintptr(unsafe.Pointer(&ms))); r == 0 || ms.availPhys == 0 {
		return nil
	}
	return []Limit{{Name: "available physical memory", Free: ms.availPhys}}
}
