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
/// database (the target of VACUUM INTO). `path` is the absolute path.
/// A NULL key registers "no encryption" for that path.
int grdbcipher_set_pending_key(const char *path, const void *key, int nKey, int version, int kdfIterations);

/// Diagnosis of the main database of `db` after an error:
#define GRDBCIPHER_STATE_OK 0
#define GRDBCIPHER_STATE_KEY_ON_PLAINTEXT 1
#define GRDBCIPHER_STATE_ENCRYPTED_WITHOUT_KEY 2
#define GRDBCIPHER_STATE_WRONG_KEY 3
#define GRDBCIPHER_STATE_CORRUPT_PAGE 4
#define GRDBCIPHER_STATE_MISSING_SALT 5   // a plaintext header, and no salt given
int grdbcipher_state(sqlite3 *db);

/// The page whose HMAC check failed last, or 0.
int grdbcipher_failed_page(sqlite3 *db);

/// Enables or disables the in-memory cache of derived keys (default: on).
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

/// Whether a file starts with the SQLite magic header ("SQLite format 3"):
/// 1 plaintext, 0 not (encrypted, or another format), -1 missing or empty.
int grdbcipher_file_is_plaintext(const char *path);

/// Reads and checks every page of the main database file of `db` (keyed):
/// returns 0 when all pages pass their HMAC check, the number of the first
/// bad page otherwise, or -1 when the file can't be read.
int grdbcipher_verify_pages(sqlite3 *db);

/// HMAC-SHA256 of `message` with `key`, into `out` (32 bytes): derives
/// per-tenant keys from a master key.
int grdbcipher_hmac_sha256(const void *key, int nKey, const void *message, int nMessage, unsigned char *out);

#endif
