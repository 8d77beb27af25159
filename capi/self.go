package main

/*
#cgo linux LDFLAGS: -ldl
#define _GNU_SOURCE
#include <stddef.h>
#ifdef _WIN32
#include <windows.h>
#else
#include <dlfcn.h>
#endif

// The path of the file this code was loaded from (libda3go.so), as the
// dynamic linker recorded it, or NULL. On Windows, the DLL's path from the
// module that holds this function.
static const char *da3go_self_path(void) {
#ifdef _WIN32
	static char path[32768];
	HMODULE h = NULL;
	if (!GetModuleHandleExA(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
			(LPCSTR)(void *)&da3go_self_path, &h)) {
		return NULL;
	}
	DWORD n = GetModuleFileNameA(h, path, sizeof path);
	return n == 0 || n >= sizeof path ? NULL : path;
#else
	Dl_info info;
	if (dladdr((void *)&da3go_self_path, &info) && info.dli_fname != NULL && info.dli_fname[0] != '\0') {
		return info.dli_fname;
	}
	return NULL;
#endif
}
*/
import "C"

import (
	"path/filepath"

	"github.com/da3-go/da3-go/backend"
)

// The backend libraries are looked for next to libda3go.so (and in its lib/),
// not next to the program that loaded it nor in the working directory. The
// path is made absolute now, at load time, while it still names the file the
// dynamic linker found.
func init() {
	p := C.da3go_self_path()
	if p == nil {
		logger.Debug("da3go: dladdr gave no path for the library; backends are looked for next to the executable")
		return
	}
	abs, err := filepath.Abs(C.GoString(p))
	if err == nil {
		err = backend.SetExecutable(abs)
	}
	if err != nil {
		logger.Debug("da3go: backends are looked for next to the executable", "err", err)
	}
}
