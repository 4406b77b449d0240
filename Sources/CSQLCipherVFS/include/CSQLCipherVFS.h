#ifndef CSQLCIPHERVFS_H
#define CSQLCIPHERVFS_H

#include <sqlite3.h>

/// Registers the "grdbcipher" VFS, wrapping the default VFS, as the new
/// default. Idempotent and thread-safe. Files without a key pass through
/// unchanged (temporary files are always encrypted with an ephemeral key).
int grdbcipher_register(void);

/// Sets the key of the main database of `db`, before its first page is read.
/// `key` is a passphrase, or a raw key written `x'<64 hex>'` or
/// `x'<64 hex><32 hex salt>'`. `version` is 3 or 4. `kdfIterations` <= 0
/// selects the version's default (64,000 for v3, 256,000 for v4).
int grdbcipher_set_key(sqlite3 *db, const void *key, int nKey, int version, int kdfIterations);

/// Registers a key for a file that SQLite will open later as a main
/// database (the target of VACUUM INTO). `path` is matched after resolving
/// symbolic links in every component, as SQLite does. A NULL key registers
/// "no encryption" for that path (otherwise a database opened by an
/// encrypted connection takes that connection's key). `pageSize` is the
/// cipher_page_size, 0 for the version's default.
int grdbcipher_set_pending_key(const char *path, const void *key, int nKey, int version, int kdfIterations, int pageSize);

/// Lets `PRAGMA page_size = pageSize` through on the encrypted main database
/// of `db`, to give the next VACUUM INTO target another page size than the
/// database's own (re-encryption with another cipher_page_size). A plain
/// VACUUM afterwards still fails: the VFS never writes pages of another
/// size than the codec's.
int grdbcipher_allow_copy_page_size(sqlite3 *db, int pageSize);

/// Removes and wipes the pending key of `path`, if SQLite never took it
/// (a VACUUM INTO that failed before opening its target).
void grdbcipher_clear_pending_key(const char *path);

/// PRAGMA rekey without SQL text, so that the key never reaches an error
/// message or a trace: SQLITE_OK, or an error code and, in `*message`, an
/// explanation to free with sqlite3_free (never containing the key).
int grdbcipher_rekey(sqlite3 *db, const void *key, int nKey, char **message);

/// The format parameters of the main database of `db` (keyed): version,
/// cipher page size, reserved bytes, KDF iterations, plaintext header size.
/// After a GRDBCIPHER_STATE_GEOMETRY failure, `foundPageSize` and
/// `foundReserve` say what the file has (reserve -1: a journal, WAL or
/// write of another size). SQLITE_MISUSE when the database has no key.
int grdbcipher_format(sqlite3 *db, int *version, int *pageSize, int *reserve, int *kdfIterations, int *plaintextHeaderSize, int *foundPageSize, int *foundReserve);

/// Diagnosis of the main database of `db` after an error:
#define GRDBCIPHER_STATE_OK 0
#define GRDBCIPHER_STATE_KEY_ON_PLAINTEXT 1
#define GRDBCIPHER_STATE_ENCRYPTED_WITHOUT_KEY 2
#define GRDBCIPHER_STATE_WRONG_KEY 3
#define GRDBCIPHER_STATE_CORRUPT_PAGE 4
#define GRDBCIPHER_STATE_MISSING_SALT 5   // a plaintext header, and no salt given
#define GRDBCIPHER_STATE_GEOMETRY 6       // page size or reserve unlike the key's format
int grdbcipher_state(sqlite3 *db);

/// The page whose HMAC check failed last, or 0.
int grdbcipher_failed_page(sqlite3 *db);

/// Enables or disables the in-memory cache of derived keys (default: on).
/// Disabling it also empties it.
void grdbcipher_set_kdf_cache(int enabled);

/// Enables or disables read-ahead (default: on): after a few consecutive
/// page reads, worker threads decrypt the next pages of the file.
void grdbcipher_set_read_ahead(int enabled);

/// The number of pages the main database file of `db` took from read-ahead.
long grdbcipher_read_ahead_pages(sqlite3 *db);

/// Empties the cache of derived keys (wiping them).
void grdbcipher_clear_kdf_cache(void);

/// The number of key derivations (PBKDF2 runs) performed so far.
long grdbcipher_kdf_count(void);

/// The number of derived keys in the cache: one per passphrase, salt and
/// parameters that an open connection uses (bounded by the cache's limit).
long grdbcipher_kdf_cache_count(void);

/// Whether a file starts with the SQLite magic header ("SQLite format 3"):
/// 1 plaintext, 0 not (encrypted, or another format), -1 missing or empty.
int grdbcipher_file_is_plaintext(const char *path);

/// Reads and checks every page of the main database file of `db` (keyed):
/// returns 0 when all pages pass their HMAC check, the number of the first
/// bad page otherwise (an all-zero page is bad: anyone can write zeros),
/// or -1 when the file can't be read. The `supersededCount` pages of
/// `superseded` (sorted ascending, without repeats) are skipped: their current version is a committed frame of
/// the WAL (which SQLite's reads check), and the main file may hold a torn
/// copy of them until the next checkpoint.
int grdbcipher_verify_pages(sqlite3 *db, const unsigned int *superseded, int supersededCount);

/// Readies `db` for a database file that did not come from this process:
/// SQLite's defensive mode (SQLITE_DBCONFIG_DEFENSIVE: no writes to the
/// schema table or shadow tables, no journal_mode=OFF) and an untrusted
/// schema (SQLITE_DBCONFIG_TRUSTED_SCHEMA off, as PRAGMA trusted_schema=OFF:
/// views and triggers can't call functions with side effects, nor virtual
/// tables). Reads nothing. SQLITE_OK, or SQLite's error.
int grdbcipher_distrust_schema(sqlite3 *db);

#endif
