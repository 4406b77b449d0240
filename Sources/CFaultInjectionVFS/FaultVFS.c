// A VFS shim for fault-injection tests: forwards everything to the VFS below
// it and, when armed, fails the N-th call of chosen operations on files
// under one path prefix. See include/CFaultInjectionVFS.h.

#include "CFaultInjectionVFS.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct FaultFile {
    sqlite3_file base;
    // The name SQLite opened the file with: valid until xClose (SQLite's
    // contract for xOpen), NULL for temporary files, which are never failed.
    const char *path;
    sqlite3_file *real;   // the underlying VFS's file, right after this struct
} FaultFile;

static sqlite3_vfs *baseVFS;
static sqlite3_vfs faultVFS;

// Arming state. `active` is read without the lock on every call so that a
// disarmed shim costs one atomic load; everything else is under `lock`.
static atomic_int active;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char prefix[4096];
static size_t prefixLength;
static unsigned failMask;
static long failAt = -1;          // -1: count only
static long maskedCalls;
static int failCode;
static int failMode;
static int failPersistent;
static long calls[FAULTVFS_OP_COUNT];
static long injected;

/// Counts a call of `op` on `path`, and returns the error to inject (and
/// its mode in `mode`), or SQLITE_OK to forward the call.
static int faultFor(const char *path, int op, int *mode) {
    if (!atomic_load_explicit(&active, memory_order_acquire) || !path) return SQLITE_OK;
    int rc = SQLITE_OK;
    pthread_mutex_lock(&lock);
    if (prefixLength > 0 && strncmp(path, prefix, prefixLength) == 0) {
        calls[op]++;
        if (failAt >= 0 && (failMask & (1u << op))) {
            long index = maskedCalls++;
            if (index == failAt || (failPersistent && index > failAt)) {
                rc = failCode;
                if (mode) *mode = failMode;
                injected++;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static void setPrefix(const char *pathPrefix) {
    size_t length = pathPrefix ? strlen(pathPrefix) : 0;
    if (length >= sizeof(prefix)) length = 0;   // too long: match nothing
    memcpy(prefix, pathPrefix ? pathPrefix : "", length);
    prefix[length] = 0;
    prefixLength = length;
}

void faultvfs_count(const char *pathPrefix) {
    pthread_mutex_lock(&lock);
    setPrefix(pathPrefix);
    failMask = 0;
    failAt = -1;
    maskedCalls = 0;
    injected = 0;
    memset(calls, 0, sizeof(calls));
    pthread_mutex_unlock(&lock);
    atomic_store_explicit(&active, 1, memory_order_release);
}

void faultvfs_arm(const char *pathPrefix, unsigned opMask, long index, int errorCode, int mode, int persistent) {
    pthread_mutex_lock(&lock);
    setPrefix(pathPrefix);
    failMask = opMask;
    failAt = index < 0 ? -1 : index;
    failCode = errorCode;
    failMode = mode;
    failPersistent = persistent;
    maskedCalls = 0;
    injected = 0;
    memset(calls, 0, sizeof(calls));
    pthread_mutex_unlock(&lock);
    atomic_store_explicit(&active, 1, memory_order_release);
}

void faultvfs_disarm(void) {
    atomic_store_explicit(&active, 0, memory_order_release);
    pthread_mutex_lock(&lock);
    failAt = -1;
    pthread_mutex_unlock(&lock);
}

long faultvfs_calls(int op) {
    if (op < 0 || op >= FAULTVFS_OP_COUNT) return -1;
    pthread_mutex_lock(&lock);
    long value = calls[op];
    pthread_mutex_unlock(&lock);
    return value;
}

long faultvfs_injected(void) {
    pthread_mutex_lock(&lock);
    long value = injected;
    pthread_mutex_unlock(&lock);
    return value;
}

// MARK: - File methods

#define REAL(file) (((FaultFile *)(file))->real)
#define PATH(file) (((FaultFile *)(file))->path)

static int faultClose(sqlite3_file *file) {
    sqlite3_file *real = REAL(file);
    int rc = real->pMethods ? real->pMethods->xClose(real) : SQLITE_OK;
    file->pMethods = NULL;
    return rc;
}

static int faultRead(sqlite3_file *file, void *buffer, int amount, sqlite3_int64 offset) {
    int mode = FAULTVFS_MODE_ERROR;
    int rc = faultFor(PATH(file), FAULTVFS_READ, &mode);
    if (rc == SQLITE_OK) return REAL(file)->pMethods->xRead(REAL(file), buffer, amount, offset);
    if (mode == FAULTVFS_MODE_SHORT) {
        int half = amount / 2;
        int realRC = half > 0 ? REAL(file)->pMethods->xRead(REAL(file), buffer, half, offset) : SQLITE_OK;
        if (realRC != SQLITE_OK && realRC != SQLITE_IOERR_SHORT_READ) return realRC;
        // xRead's contract: a short read zero-fills the rest of the buffer.
        memset((char *)buffer + half, 0, (size_t)(amount - half));
        return SQLITE_IOERR_SHORT_READ;
    }
    return rc;
}

static int faultWrite(sqlite3_file *file, const void *buffer, int amount, sqlite3_int64 offset) {
    int mode = FAULTVFS_MODE_ERROR;
    int rc = faultFor(PATH(file), FAULTVFS_WRITE, &mode);
    if (rc == SQLITE_OK) return REAL(file)->pMethods->xWrite(REAL(file), buffer, amount, offset);
    if (mode == FAULTVFS_MODE_SHORT && amount / 2 > 0) {
        // A torn write: part of the bytes reach the file before the error.
        (void)REAL(file)->pMethods->xWrite(REAL(file), buffer, amount / 2, offset);
    }
    return rc;
}

static int faultTruncate(sqlite3_file *file, sqlite3_int64 size) {
    int rc = faultFor(PATH(file), FAULTVFS_TRUNCATE, NULL);
    return rc != SQLITE_OK ? rc : REAL(file)->pMethods->xTruncate(REAL(file), size);
}

static int faultSync(sqlite3_file *file, int flags) {
    int rc = faultFor(PATH(file), FAULTVFS_SYNC, NULL);
    return rc != SQLITE_OK ? rc : REAL(file)->pMethods->xSync(REAL(file), flags);
}

static int faultFileSize(sqlite3_file *file, sqlite3_int64 *size) {
    int rc = faultFor(PATH(file), FAULTVFS_FILESIZE, NULL);
    return rc != SQLITE_OK ? rc : REAL(file)->pMethods->xFileSize(REAL(file), size);
}

static int faultLock(sqlite3_file *file, int level) {
    int rc = faultFor(PATH(file), FAULTVFS_LOCK, NULL);
    return rc != SQLITE_OK ? rc : REAL(file)->pMethods->xLock(REAL(file), level);
}

static int faultUnlock(sqlite3_file *file, int level) {
    return REAL(file)->pMethods->xUnlock(REAL(file), level);
}

static int faultCheckReservedLock(sqlite3_file *file, int *result) {
    return REAL(file)->pMethods->xCheckReservedLock(REAL(file), result);
}

static int faultFileControl(sqlite3_file *file, int op, void *arg) {
    int rc = REAL(file)->pMethods->xFileControl(REAL(file), op, arg);
    // The VFS name, for PRAGMA vfs_list-style diagnostics: mention the shim.
    if (op == SQLITE_FCNTL_VFSNAME && rc == SQLITE_OK && arg) {
        char **name = (char **)arg;
        char *wrapped = sqlite3_mprintf("faultvfs/%z", *name);
        *name = wrapped;
    }
    return rc;
}

static int faultSectorSize(sqlite3_file *file) {
    return REAL(file)->pMethods->xSectorSize(REAL(file));
}

static int faultDeviceCharacteristics(sqlite3_file *file) {
    return REAL(file)->pMethods->xDeviceCharacteristics(REAL(file));
}

static int faultShmMap(sqlite3_file *file, int region, int size, int extend, void volatile **pointer) {
    int rc = faultFor(PATH(file), FAULTVFS_SHMMAP, NULL);
    if (rc != SQLITE_OK) return rc;
    return REAL(file)->pMethods->xShmMap(REAL(file), region, size, extend, pointer);
}

static int faultShmLock(sqlite3_file *file, int offset, int n, int flags) {
    return REAL(file)->pMethods->xShmLock(REAL(file), offset, n, flags);
}

static void faultShmBarrier(sqlite3_file *file) {
    REAL(file)->pMethods->xShmBarrier(REAL(file));
}

static int faultShmUnmap(sqlite3_file *file, int deleteFlag) {
    return REAL(file)->pMethods->xShmUnmap(REAL(file), deleteFlag);
}

static int faultFetch(sqlite3_file *file, sqlite3_int64 offset, int amount, void **pointer) {
    return REAL(file)->pMethods->xFetch(REAL(file), offset, amount, pointer);
}

static int faultUnfetch(sqlite3_file *file, sqlite3_int64 offset, void *pointer) {
    return REAL(file)->pMethods->xUnfetch(REAL(file), offset, pointer);
}

// One method table per version of the underlying file's table: SQLite
// checks iVersion before calling the shm and mmap methods.
static const sqlite3_io_methods faultMethods[3] = {
    {1, faultClose, faultRead, faultWrite, faultTruncate, faultSync, faultFileSize, faultLock, faultUnlock,
     faultCheckReservedLock, faultFileControl, faultSectorSize, faultDeviceCharacteristics, 0, 0, 0, 0, 0, 0},
    {2, faultClose, faultRead, faultWrite, faultTruncate, faultSync, faultFileSize, faultLock, faultUnlock,
     faultCheckReservedLock, faultFileControl, faultSectorSize, faultDeviceCharacteristics,
     faultShmMap, faultShmLock, faultShmBarrier, faultShmUnmap, 0, 0},
    {3, faultClose, faultRead, faultWrite, faultTruncate, faultSync, faultFileSize, faultLock, faultUnlock,
     faultCheckReservedLock, faultFileControl, faultSectorSize, faultDeviceCharacteristics,
     faultShmMap, faultShmLock, faultShmBarrier, faultShmUnmap, faultFetch, faultUnfetch},
};

// MARK: - VFS methods

static int faultOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *outFlags) {
    FaultFile *faultFile = (FaultFile *)file;
    faultFile->path = name;
    faultFile->real = (sqlite3_file *)(faultFile + 1);
    file->pMethods = NULL;
    int rc = faultFor(name, FAULTVFS_OPEN, NULL);
    if (rc != SQLITE_OK) return rc;
    rc = baseVFS->xOpen(baseVFS, name, faultFile->real, flags, outFlags);
    // SQLite calls xClose whenever pMethods is set, even after a failed
    // open: mirror the underlying file.
    if (faultFile->real->pMethods) {
        int version = faultFile->real->pMethods->iVersion;
        if (version < 1) version = 1;
        if (version > 3) version = 3;
        file->pMethods = &faultMethods[version - 1];
    }
    return rc;
}

static int faultDelete(sqlite3_vfs *vfs, const char *name, int syncDir) {
    int rc = faultFor(name, FAULTVFS_DELETE, NULL);
    return rc != SQLITE_OK ? rc : baseVFS->xDelete(baseVFS, name, syncDir);
}

static int faultAccess(sqlite3_vfs *vfs, const char *name, int flags, int *result) {
    int rc = faultFor(name, FAULTVFS_ACCESS, NULL);
    return rc != SQLITE_OK ? rc : baseVFS->xAccess(baseVFS, name, flags, result);
}

static int faultFullPathname(sqlite3_vfs *vfs, const char *name, int n, char *out) { return baseVFS->xFullPathname(baseVFS, name, n, out); }
static void *faultDlOpen(sqlite3_vfs *vfs, const char *name) { return baseVFS->xDlOpen(baseVFS, name); }
static void faultDlError(sqlite3_vfs *vfs, int n, char *out) { baseVFS->xDlError(baseVFS, n, out); }
static void (*faultDlSym(sqlite3_vfs *vfs, void *handle, const char *symbol))(void) { return baseVFS->xDlSym(baseVFS, handle, symbol); }
static void faultDlClose(sqlite3_vfs *vfs, void *handle) { baseVFS->xDlClose(baseVFS, handle); }
static int faultRandomness(sqlite3_vfs *vfs, int n, char *out) { return baseVFS->xRandomness(baseVFS, n, out); }
static int faultSleep(sqlite3_vfs *vfs, int micro) { return baseVFS->xSleep(baseVFS, micro); }
static int faultCurrentTime(sqlite3_vfs *vfs, double *out) { return baseVFS->xCurrentTime(baseVFS, out); }
static int faultGetLastError(sqlite3_vfs *vfs, int n, char *out) { return baseVFS->xGetLastError ? baseVFS->xGetLastError(baseVFS, n, out) : 0; }
static int faultCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
    if (baseVFS->iVersion >= 2 && baseVFS->xCurrentTimeInt64) return baseVFS->xCurrentTimeInt64(baseVFS, out);
    double now = 0;
    int rc = baseVFS->xCurrentTime(baseVFS, &now);
    *out = (sqlite3_int64)(now * 86400000.0);
    return rc;
}
static int faultSetSystemCall(sqlite3_vfs *vfs, const char *name, sqlite3_syscall_ptr p) { return baseVFS->iVersion >= 3 ? baseVFS->xSetSystemCall(baseVFS, name, p) : SQLITE_NOTFOUND; }
static sqlite3_syscall_ptr faultGetSystemCall(sqlite3_vfs *vfs, const char *name) { return baseVFS->iVersion >= 3 ? baseVFS->xGetSystemCall(baseVFS, name) : 0; }
static const char *faultNextSystemCall(sqlite3_vfs *vfs, const char *name) { return baseVFS->iVersion >= 3 ? baseVFS->xNextSystemCall(baseVFS, name) : 0; }

static pthread_mutex_t installLock = PTHREAD_MUTEX_INITIALIZER;
static int installResult = -1;

int faultvfs_install(const char *underlying) {
    pthread_mutex_lock(&installLock);
    if (installResult < 0) {
        installResult = sqlite3_initialize();
        if (installResult == SQLITE_OK) {
            baseVFS = sqlite3_vfs_find(underlying);
            if (!baseVFS) {
                installResult = SQLITE_NOTFOUND;
            } else {
                faultVFS.iVersion = 3;
                faultVFS.szOsFile = (int)sizeof(FaultFile) + baseVFS->szOsFile;
                faultVFS.mxPathname = baseVFS->mxPathname;
                faultVFS.zName = "faultvfs";
                faultVFS.xOpen = faultOpen;
                faultVFS.xDelete = faultDelete;
                faultVFS.xAccess = faultAccess;
                faultVFS.xFullPathname = faultFullPathname;
                faultVFS.xDlOpen = faultDlOpen;
                faultVFS.xDlError = faultDlError;
                faultVFS.xDlSym = faultDlSym;
                faultVFS.xDlClose = faultDlClose;
                faultVFS.xRandomness = faultRandomness;
                faultVFS.xSleep = faultSleep;
                faultVFS.xCurrentTime = faultCurrentTime;
                faultVFS.xGetLastError = faultGetLastError;
                faultVFS.xCurrentTimeInt64 = faultCurrentTimeInt64;
                faultVFS.xSetSystemCall = faultSetSystemCall;
                faultVFS.xGetSystemCall = faultGetSystemCall;
                faultVFS.xNextSystemCall = faultNextSystemCall;
                installResult = sqlite3_vfs_register(&faultVFS, 1);
            }
        }
    }
    int result = installResult;
    pthread_mutex_unlock(&installLock);
    return result;
}

const char *faultvfs_underlying_name(void) {
    pthread_mutex_lock(&installLock);
    const char *name = (installResult == SQLITE_OK && baseVFS) ? baseVFS->zName : NULL;
    pthread_mutex_unlock(&installLock);
    return name;
}

// Installed when the test binary loads, before any test opens a database:
// the cipher VFS, which registers itself over the default VFS of the moment
// it is first used, then always sits above this shim, so that faults hit
// the encrypted bytes on their way to the disk as a real disk's would.
// Disarmed, the shim only forwards (one atomic load per call), so the other
// suites linked into the same test binary are unaffected.
__attribute__((constructor)) static void faultvfs_install_at_load(void) {
    (void)faultvfs_install(NULL);
}
