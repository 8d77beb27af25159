//go:build !linux

package sysmem

func limits() []Limit { return nil }
