package ggml

/*
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
static int da3_limit_arenas(int n) { return mallopt(M_ARENA_MAX, n); }
#else
static int da3_limit_arenas(int n) { (void) n; return 0; }
#endif
*/
import "C"

// LimitMallocArenas caps the C allocator's arenas at n (glibc's mallopt
// M_ARENA_MAX; a no-op elsewhere). glibc gives each thread that allocates
// an arena of its own, up to 8 per core, each reserving 64 MiB of address
// space: under an address-space limit (ulimit -v) that reservation, not the
// memory used, is what runs out. ggml allocates large buffers, rarely and
// from few threads, so two arenas cost nothing. Call it at program start.
func LimitMallocArenas(n int) bool { return C.da3_limit_arenas(C.int(n)) == 1 }
