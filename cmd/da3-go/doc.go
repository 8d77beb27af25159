// Command da3-go runs Depth Anything 3 and Depth Anything V2 models (GGUF
// files) on the CPU and the ggml GPU backends.
//
// Usage:
//
//	da3-go <command> [flags] [arguments]
//
// The commands are depth, pose, reconstruct, convert, quantize, info, bench,
// devices, models, fetch, serve and version; 'da3-go help' lists them and
// 'da3-go help <command>' (or 'da3-go <command> -h') prints a command's
// flags, on stdout. Flags may come before, between or after the arguments;
// "--" ends them.
//
// Results go to stdout; progress, warnings and errors to stderr. A usage
// error is one line naming the problem (with the near misses of a mistyped
// flag or command) and a line pointing to the help.
//
// Large photos: the network sees an image at its process resolution (504
// or 518 pixels), so 'da3-go depth -tile on' runs it once whole and again
// on overlapping tiles, each at the process resolution, fits each tile's
// map to the whole image's and blends them into one map at the image size
// (-tile auto: only images whose longer side is at least 4× the process
// resolution; -tile-size, -tile-overlap, -tile-fit; docs/tiling.md).
//
// Exit status:
//
//	0    success (also -h and 'da3-go help')
//	1    the command failed: a file, model, device or memory error
//	2    usage error: an unknown flag or command, a bad flag value, wrong arguments
//	130  interrupted (Ctrl-C or SIGTERM)
package main
