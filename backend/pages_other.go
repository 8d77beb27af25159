//go:build !unix

package backend

// dropPages does nothing where the loader reads the model file into memory
// instead of mapping it (loader/mmap_other.go): those pages hold the only
// copy of the weights.
func dropPages([]byte) {}
