//go:build !linux && !windows

package sysmem

func limits() []Limit { return nil }
