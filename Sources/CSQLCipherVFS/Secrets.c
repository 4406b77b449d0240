// Memory for secrets (keys, passphrases, derived keys): page-aligned,
// wiped on free, kept out of core dumps and, when allowed, out of swap.

#include "Internal.h"
#include <sys/mman.h>

// Linux's madvise advice values (stable ABI), which the system headers
// declare only with default features, off in SwiftPM's module builds.
#if defined(__linux__) && !defined(MADV_DONTDUMP)
#define MADV_DONTDUMP 16
#define MADV_DODUMP 17
#endif

static size_t secret_length(size_t size) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (size + page - 1) / page * page;
}

/// Zeroed memory for keys and passphrases: whole pages, excluded from core
/// dumps, and locked out of swap when RLIMIT_MEMLOCK allows (best effort:
/// a failed mlock leaves the memory usable).
HIDDEN void *secret_alloc(size_t size) {
    size_t length = secret_length(size);
    void *memory = NULL;
    if (posix_memalign(&memory, (size_t)sysconf(_SC_PAGESIZE), length) != 0) return NULL;
    memset(memory, 0, length);
#ifdef MADV_DONTDUMP
    madvise(memory, length, MADV_DONTDUMP);
#endif
    mlock(memory, length);
    return memory;
}

/// Wipes and frees memory from secret_alloc(size).
HIDDEN void secret_free(void *memory, size_t size) {
    if (!memory) return;
    size_t length = secret_length(size);
    OPENSSL_cleanse(memory, length);
    munlock(memory, length);
#ifdef MADV_DODUMP
    madvise(memory, length, MADV_DODUMP);
#endif
    free(memory);
}
