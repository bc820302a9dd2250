/* bcryptprimitives.dll for wine 8.0, which lacks it: Rust's std (1.78 and
 * later) imports ProcessPrng from it for its random numbers (HashMap keys), so
 * no Rust program starts under that wine without it. This DLL is only put in
 * the throwaway wine prefix of scripts/build-windows.sh's checks, never
 * shipped: Windows 10 and later have their own.
 * ProcessPrng fills a buffer from the system's generator; here it is advapi32's
 * RtlGenRandom (exported as SystemFunction036), which wine implements. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    /* RtlGenRandom takes a ULONG length: fill larger requests in pieces. */
    while (length > 0) {
        ULONG piece = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, piece))
            return FALSE;
        data += piece;
        length -= piece;
    }
    return TRUE;
}
