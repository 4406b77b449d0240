#ifndef CFAULTINJECTIONVFS_H
#define CFAULTINJECTIONVFS_H

#include <sqlite3.h>

/// Test support: an SQLite VFS shim ("faultvfs") that forwards every call to
/// an underlying VFS and, when armed, fails chosen calls on chosen files.
///
/// Only files whose path starts with the armed prefix are counted and
/// failed: tests of other suites, running in the same process, go through
/// the shim untouched.

/// The operations the shim counts and can fail (bit positions of a mask).
typedef enum {
    FAULTVFS_OPEN = 0,      // xOpen of a file (database, journal, WAL)
    FAULTVFS_READ,          // xRead
    FAULTVFS_WRITE,         // xWrite
    FAULTVFS_TRUNCATE,      // xTruncate
    FAULTVFS_SYNC,          // xSync
    FAULTVFS_FILESIZE,      // xFileSize
    FAULTVFS_LOCK,          // xLock
    FAULTVFS_SHMMAP,        // xShmMap
    FAULTVFS_DELETE,        // xDelete (journal and WAL files)
    FAULTVFS_ACCESS,        // xAccess
    FAULTVFS_OP_COUNT
} faultvfs_op;

/// How an injected call fails.
typedef enum {
    /// The call returns the error and has no effect.
    FAULTVFS_MODE_ERROR = 0,
    /// xWrite: the first half of the bytes reach the file, then the call
    /// returns the error (a disk that fills up in the middle of a page).
    /// xRead: the first half of the bytes are read, the rest zero-filled,
    /// and the call returns SQLITE_IOERR_SHORT_READ (the error is ignored).
    FAULTVFS_MODE_SHORT = 1,
} faultvfs_mode;

/// Registers "faultvfs" over `underlying` (a VFS name, or NULL for the
/// current default) and makes it the default. Idempotent: later calls
/// return the result of the first. SQLITE_OK or an SQLite error code.
int faultvfs_install(const char *underlying);

/// The name of the VFS the shim forwards to, or NULL before installation.
const char *faultvfs_underlying_name(void);

/// Counts, without failing, the calls of every operation on files under
/// `pathPrefix`. Resets the counters.
void faultvfs_count(const char *pathPrefix);

/// Counts calls of the operations of `opMask` (bits `1 << faultvfs_op`) on
/// files under `pathPrefix`; the call of index `failAt` (0-based, across
/// the operations of the mask) fails with `errorCode` in `mode`. When
/// `persistent` is non-zero, every later call of the mask fails too (a disk
/// that stays full). Resets the counters.
void faultvfs_arm(const char *pathPrefix, unsigned opMask, long failAt, int errorCode, int mode, int persistent);

/// Stops counting and failing. Counters keep their values.
void faultvfs_disarm(void);

/// Calls of `op` counted since the last faultvfs_count or faultvfs_arm.
long faultvfs_calls(int op);

/// Faults injected since the last faultvfs_arm.
long faultvfs_injected(void);

#endif
