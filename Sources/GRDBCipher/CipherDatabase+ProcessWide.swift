import CSQLCipherVFS
import GRDB

// The process-wide state of the encryption layer, all of it in C
// (CSQLCipherVFS), shared by every encrypted database of the process
// whichever module, registry or service opened it, and living until the
// process exits. Nothing here belongs to a `DatabaseService`, a registry or
// a connection: the switches below change it for all of them at once.
//
// - The derived-key cache (KeyDerivation.c: the cache list, its mutex, its
//   per-process HMAC key, the enabled flag and the derivation counter):
//   `setKeyCacheEnabled(_:)`, `clearKeyCache()`, `keyDerivationCount`.
// - The pending keys (PendingKeys.c): keys registered for files SQLite
//   opens later (the targets of `VACUUM INTO` in conversions), under a
//   mutex; each entry is taken by the open it was registered for.
// - The read-ahead workers and their job queue (ReadAhead.c: up to four
//   detached threads started on first use, the queue, its mutex and the
//   enabled flag): `setReadAheadEnabled(_:)`.
// - The VFS registration (VFS.c): `grdbcipher`, registered once as
//   SQLite's default VFS on the first open or conversion, never
//   unregistered; every SQLite connection of the process then goes through
//   it (a connection without a key reads and writes plain files).
// - The fork handler (Codec.c): installed once with `pthread_atfork`, it
//   bumps a generation counter in the child so that no IV drawn before a
//   fork is used after it.
//
// The per-connection counters (`readAheadPageCount(in:)`) sit here with the
// switch they measure.
extension CipherDatabase {
    // MARK: - Derived key cache

    /// Whether derived keys are cached in memory (the default).
    ///
    /// PBKDF2 costs about 0.1–0.3 s per derivation at the v4 default, and
    /// every connection of a pool derives the key of its database. The
    /// cache keeps derived keys in process memory, keyed by an HMAC of the
    /// passphrase, the salt and the parameters, for as long as a
    /// connection of their database is open: the other connections of a
    /// pool, and a file opened again while it is open, skip the KDF. When
    /// the last connection that uses a key closes, or re-keys, its entry is
    /// wiped: a closed database's key does not stay in memory. The
    /// trade-off: the keys of open databases stay in memory, where a
    /// memory dump would find them, until ``clearKeyCache()``.
    ///
    /// The switch is process-wide: it applies to every encrypted database
    /// of the process, open or opened later.
    ///
    /// ```swift
    /// // A tool that opens each file once: keep no derived key in memory.
    /// CipherDatabase.setKeyCacheEnabled(false)
    /// ```
    public static func setKeyCacheEnabled(_ enabled: Bool) {
        grdbcipher_set_kdf_cache(enabled ? 1 : 0)
    }

    /// Wipes the cached derived keys of the whole process.
    public static func clearKeyCache() {
        grdbcipher_clear_kdf_cache()
    }

    /// The number of key derivations performed by the process.
    public static var keyDerivationCount: Int {
        Int(grdbcipher_kdf_count())
    }

    /// The number of derived keys in the cache.
    static var cachedKeyCount: Int {
        Int(grdbcipher_kdf_cache_count())
    }

    // MARK: - Read-ahead

    /// Whether encrypted databases are read ahead (the default).
    ///
    /// Checking and decrypting a page costs more than SQLite's own work on
    /// it (v4's HMAC-SHA512 alone takes about 6 µs per 4 KB page). Once a
    /// connection reads several consecutive pages of a v4 file, as in a
    /// table scan, `VACUUM INTO` or an export, a few worker threads (one
    /// less than the processor count, at most four) check and decrypt the
    /// next 32 pages while SQLite works on the current one. v3 files are
    /// not read ahead: their 1 KB pages decrypt faster than a worker can
    /// hand them over.
    ///
    /// A prefetched page is used only if its IV and HMAC in the file are
    /// still those of the checked bytes, so pages rewritten in between are
    /// read again, and a tampered page fails as it does without read-ahead.
    /// Decrypted pages waiting in the window are plaintext in memory, as in
    /// SQLite's page cache; they are wiped when the connection closes.
    ///
    /// The trade-off: read-ahead lowers a scan's latency by using idle
    /// processors, not its CPU time. On a machine whose cores are all busy,
    /// it brings nothing, and a few percent of bookkeeping. Benchmarks:
    /// `Benchmarks/RESULTS.md`.
    ///
    /// The switch is process-wide: it applies to every encrypted database
    /// of the process.
    ///
    /// ```swift
    /// // A server saturated with concurrent queries: keep every core for them.
    /// CipherDatabase.setReadAheadEnabled(false)
    /// ```
    public static func setReadAheadEnabled(_ enabled: Bool) {
        grdbcipher_set_read_ahead(enabled ? 1 : 0)
    }

    /// The number of pages the connection took from read-ahead (see
    /// ``setReadAheadEnabled(_:)``): 0 for a plain database.
    public static func readAheadPageCount(in db: Database) -> Int {
        Int(grdbcipher_read_ahead_pages(db.sqliteConnection))
    }
}
