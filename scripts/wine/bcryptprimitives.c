// A stand-in for Windows' bcryptprimitives.dll, for Wine releases older than
// 9 that lack it (Debian 12's Wine 8): Go's runtime (1.24 and later) draws
// its random bytes from ProcessPrng there and stops at startup without it.
// scripts/windows-wine-test.sh builds it into the test's Wine prefix only;
// real Windows (10 and later) has the DLL, and da3-go.exe does not ship this.
#include <windows.h>

// RtlGenRandom, exported by advapi32 as SystemFunction036.
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T n) {
    while (n > 0) {
        ULONG chunk = n > 0x40000000 ? 0x40000000 : (ULONG) n;
        if (!SystemFunction036(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        n -= chunk;
    }
    return TRUE;
}
