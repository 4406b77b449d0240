// The VFS object: wraps the default VFS and registers as the new default.

#include "Internal.h"

static sqlite3_vfs cipherVFS;
static sqlite3_vfs *baseVFS;

static int cipherOpen(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *pFile, int flags, int *pOutFlags) {
    CipherFile *file = (CipherFile *)pFile;
    memset(file, 0, sizeof(CipherFile));
    file->real = (sqlite3_file *)(file + 1);
    file->lastPgnoOffset = -100;
    file->recordOffset = -100;
    file->walHeaderOffset = -1;
    file->walChainOffset = -1;
    file->pendingTruncate = -1;
    file->walLastFrameOffset = -1;
    if (flags & SQLITE_OPEN_MAIN_DB) file->kind = KIND_MAIN;
    else if (flags & SQLITE_OPEN_MAIN_JOURNAL) file->kind = KIND_JOURNAL;
    else if (flags & SQLITE_OPEN_WAL) file->kind = KIND_WAL;
    else if (flags & (SQLITE_OPEN_TEMP_DB | SQLITE_OPEN_TEMP_JOURNAL | SQLITE_OPEN_SUBJOURNAL | SQLITE_OPEN_TRANSIENT_DB)) file->kind = KIND_TEMP;
    else file->kind = KIND_OTHER;

    int rc = baseVFS->xOpen(baseVFS, name, file->real, flags, pOutFlags);
    if (rc != SQLITE_OK) {
        file->real->pMethods = NULL;
        pFile->pMethods = NULL;
        return rc;
    }
    if (file->kind == KIND_TEMP && RAND_bytes(file->tempKey, KEY_SIZE) != 1) {
        file->real->pMethods->xClose(file->real);
        return SQLITE_IOERR;
    }
    if ((file->kind == KIND_JOURNAL || file->kind == KIND_WAL) && name) {
        sqlite3_file *main = sqlite3_database_file_object(name);
        if (main && main->pMethods == &cipherMethods) file->mainFile = (CipherFile *)main;
        if (file->mainFile && file->kind == KIND_JOURNAL) {
            if (inherit_key(file->mainFile) != SQLITE_OK) {
                file->real->pMethods->xClose(file->real);
                return SQLITE_NOMEM;
            }
            if (file->mainFile->codec) reserve_for_new_database(file->mainFile);
        }
    }
    if (file->kind == KIND_MAIN && name) {
        Codec *codec = NULL;
        if (take_pending_key(name, &codec)) {
            file->codec = codec;
            file->explicitlyPlain = codec == NULL;
        }
    }
    pFile->pMethods = &cipherMethods;
    return SQLITE_OK;
}

static int cipherDelete(sqlite3_vfs *vfs, const char *name, int syncDir) {
    return baseVFS->xDelete(baseVFS, name, syncDir);
}

static int cipherAccess(sqlite3_vfs *vfs, const char *name, int flags, int *pResOut) {
    return baseVFS->xAccess(baseVFS, name, flags, pResOut);
}

static int cipherFullPathname(sqlite3_vfs *vfs, const char *name, int n, char *out) {
    return baseVFS->xFullPathname(baseVFS, name, n, out);
}

static void *cipherDlOpen(sqlite3_vfs *vfs, const char *name) { return baseVFS->xDlOpen(baseVFS, name); }
static void cipherDlError(sqlite3_vfs *vfs, int n, char *out) { baseVFS->xDlError(baseVFS, n, out); }
static void (*cipherDlSym(sqlite3_vfs *vfs, void *p, const char *sym))(void) { return baseVFS->xDlSym(baseVFS, p, sym); }
static void cipherDlClose(sqlite3_vfs *vfs, void *p) { baseVFS->xDlClose(baseVFS, p); }
static int cipherRandomness(sqlite3_vfs *vfs, int n, char *out) { return baseVFS->xRandomness(baseVFS, n, out); }
static int cipherSleep(sqlite3_vfs *vfs, int micro) { return baseVFS->xSleep(baseVFS, micro); }
static int cipherCurrentTime(sqlite3_vfs *vfs, double *out) { return baseVFS->xCurrentTime(baseVFS, out); }
static int cipherGetLastError(sqlite3_vfs *vfs, int n, char *out) { return baseVFS->xGetLastError ? baseVFS->xGetLastError(baseVFS, n, out) : 0; }
static int cipherCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *out) { return baseVFS->xCurrentTimeInt64(baseVFS, out); }
static int cipherSetSystemCall(sqlite3_vfs *vfs, const char *name, sqlite3_syscall_ptr p) { return baseVFS->xSetSystemCall(baseVFS, name, p); }
static sqlite3_syscall_ptr cipherGetSystemCall(sqlite3_vfs *vfs, const char *name) { return baseVFS->xGetSystemCall(baseVFS, name); }
static const char *cipherNextSystemCall(sqlite3_vfs *vfs, const char *name) { return baseVFS->xNextSystemCall(baseVFS, name); }

static pthread_once_t registerOnce = PTHREAD_ONCE_INIT;
static int registerResult = SQLITE_ERROR;

static void register_vfs(void) {
    sqlite3_initialize();
    baseVFS = sqlite3_vfs_find(NULL);
    if (!baseVFS) return;
    cipherVFS.iVersion = 3;
    cipherVFS.szOsFile = (int)sizeof(CipherFile) + baseVFS->szOsFile;
    cipherVFS.mxPathname = baseVFS->mxPathname;
    cipherVFS.zName = "grdbcipher";
    cipherVFS.xOpen = cipherOpen;
    cipherVFS.xDelete = cipherDelete;
    cipherVFS.xAccess = cipherAccess;
    cipherVFS.xFullPathname = cipherFullPathname;
    cipherVFS.xDlOpen = cipherDlOpen;
    cipherVFS.xDlError = cipherDlError;
    cipherVFS.xDlSym = cipherDlSym;
    cipherVFS.xDlClose = cipherDlClose;
    cipherVFS.xRandomness = cipherRandomness;
    cipherVFS.xSleep = cipherSleep;
    cipherVFS.xCurrentTime = cipherCurrentTime;
    cipherVFS.xGetLastError = cipherGetLastError;
    cipherVFS.xCurrentTimeInt64 = cipherCurrentTimeInt64;
    cipherVFS.xSetSystemCall = cipherSetSystemCall;
    cipherVFS.xGetSystemCall = cipherGetSystemCall;
    cipherVFS.xNextSystemCall = cipherNextSystemCall;
    registerResult = sqlite3_vfs_register(&cipherVFS, 1);
}

int grdbcipher_register(void) {
    pthread_once(&registerOnce, register_vfs);
    return registerResult;
}
