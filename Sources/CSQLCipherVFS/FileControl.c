// File controls: PRAGMA key, rekey, cipher_compatibility, cipher_page_size,
// cipher_plaintext_header_size and cipher_salt, and the page_size and
// mmap_size settings an encrypted database can't take.

#include "Internal.h"
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

/// The schema name under which the connection knows `file` ("main", or an
/// attached name), or NULL.
static const char *schema_name(CipherFile *file) {
    if (!file->db) return NULL;
    for (int i = 0;; i++) {
        const char *name = sqlite3_db_name(file->db, i);
        if (!name) return NULL;
        sqlite3_file *candidate = NULL;
        if (sqlite3_file_control(file->db, name, SQLITE_FCNTL_FILE_POINTER, &candidate) == SQLITE_OK
            && candidate == &file->base) return name;
    }
}

/// A new, empty database file that gets a key is made readable by its owner
/// only (0600): its ciphertext is enough to guess a passphrase offline.
/// Its journal and WAL take its mode when SQLite creates them.
///
/// SQLite gives no access to its descriptor, so the name is opened again,
/// without following a link (O_NOFOLLOW), and the mode changed on that
/// descriptor (fchmod) only when it is an empty regular file of this
/// process's user with a single name: what SQLite just created. A name
/// swapped meanwhile for a link, or for a hard link to another file,
/// changes nothing (review security-2, L6).
static void restrict_new_file(CipherFile *file) {
    const char *schema = schema_name(file);
    const char *path = schema ? sqlite3_db_filename(file->db, schema) : NULL;
    if (!path || !*path) return;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    struct stat status;
    if (fstat(fd, &status) == 0 && S_ISREG(status.st_mode) && status.st_size == 0
        && status.st_nlink == 1 && status.st_uid == geteuid() && (status.st_mode & 07777) != 0600) {
        fchmod(fd, 0600);
    }
    close(fd);
}

/// Gives SQLite the codec's page size, and a new database the codec's
/// reserved bytes too, as SQLCipher does in its pager: SQLite's own
/// defaults (4096-byte pages, no reserve) would not fit the codec, and the
/// VFS refuses to write them.
///
/// An existing file keeps its header's geometry, which the VFS checks
/// against the codec when it reads page 1; but until SQLite has read page
/// 1, it reads pages of the size set here. When page 1 comes from the WAL,
/// SQLite reads it with that size: with the 4096-byte default, a file of
/// larger pages (cipher_page_size) got a read of part of a frame, which the
/// VFS refuses. (SQLite ignores the pragma once page 1 fixed the size.)
static void apply_geometry(CipherFile *file) {
    if (!file->db || !file->codec) return;
    const char *schema = schema_name(file);
    if (!schema) return;
    char *sql = sqlite3_mprintf("PRAGMA \"%w\".page_size = %d", schema, file->codec->pageSize);
    if (sql) {
        sqlite3_exec(file->db, sql, NULL, NULL, NULL);
        sqlite3_free(sql);
    }
    sqlite3_int64 size = 0;
    if (file->real->pMethods->xFileSize(file->real, &size) != SQLITE_OK || size > 0) return;
    int reserve = file->codec->reserve;
    sqlite3_file_control(file->db, schema, SQLITE_FCNTL_RESERVE_BYTES, &reserve);
    restrict_new_file(file);
}

/// Gives a new database that took its connection's key (an ATTACH) the
/// codec's reserved bytes, when SQLite opens its first journal: SQLite lays
/// out page 1 right after, with the reserve asked for here. SQLite's page
/// size for it must already be the codec's (PRAGMA aux.page_size for a
/// version 3 key); otherwise its first write fails, as any write of pages
/// unlike the codec's does.
HIDDEN void reserve_for_new_database(CipherFile *file) {
    if (!file->db || !file->codec) return;
    sqlite3_int64 size = 0;
    if (file->real->pMethods->xFileSize(file->real, &size) != SQLITE_OK || size > 0) return;
    const char *schema = schema_name(file);
    if (!schema) return;
    int reserve = file->codec->reserve;
    sqlite3_file_control(file->db, schema, SQLITE_FCNTL_RESERVE_BYTES, &reserve);
    restrict_new_file(file);
}

/// No memory-mapped I/O under a keyed file: xFetch never hands out pages,
/// and a mapping would let the connection remap the file while read-ahead
/// workers read through it.
static void disable_mmap(CipherFile *file) {
    sqlite3_int64 limit = 0;
    file->real->pMethods->xFileControl(file->real, SQLITE_FCNTL_MMAP_SIZE, &limit);
}

HIDDEN int set_file_key(CipherFile *file, const void *key, int nKey, int version, int kdfIterations) {
    if (file->kind != KIND_MAIN) return SQLITE_MISUSE;
    Codec *codec = codec_new(key, nKey, version, kdfIterations);
    if (!codec) return SQLITE_MISUSE;
    codec->plaintextHeaderSize = file->requestedHeaderSize;
    if (file->requestedPageSize && codec_set_page_size(codec, file->requestedPageSize) != SQLITE_OK) {
        codec_free(codec);
        return SQLITE_MISUSE;
    }
    if (!codec_geometry_is_valid(codec)) { codec_free(codec); return SQLITE_MISUSE; }
    if (file->hasRequestedSalt && !codec->hasExplicitSalt) {
        memcpy(codec->salt, file->requestedSalt, SALT_SIZE);
        codec->hasExplicitSalt = 1;
    }
    read_ahead_free(file);
    codec_free(file->codec);
    file->codec = codec;
    file->explicitlyPlain = 0;
    disable_mmap(file);
    apply_geometry(file);
    return SQLITE_OK;
}

/// Fails a pragma with a message SQLite reports as the statement's error.
static int pragma_error(char **args, const char *message) {
    args[0] = sqlite3_mprintf("%s", message);
    return SQLITE_ERROR;
}

/// Rewrites every page under a new key in one transaction (PRAGMA rekey,
/// grdbcipher_rekey). `message`, if not NULL, receives an sqlite3_malloc'd
/// explanation of a failure; it never contains the key.
///
/// The rewrite is a VACUUM run on the connection, so SQLite's rollback
/// journal makes it atomic: journal pages keep the old key, pages written
/// to the database take the new one, and until the journal is gone a crash
/// or an error rolls the file back to the old key, page by page. The salt,
/// page size and plaintext header are kept (unless the new key is a raw key
/// with its own salt).
HIDDEN int file_rekey(CipherFile *file, const void *key, int nKey, char **message) {
#define REKEY_FAIL(rc_, text) do { if (message) *message = sqlite3_mprintf("%s", text); return (rc_); } while (0)
    Codec *codec = file->codec;
    if (!codec) REKEY_FAIL(SQLITE_ERROR, "PRAGMA rekey: the database has no key; set it with PRAGMA key first (to encrypt a plain database, use CipherDatabase.encrypt or registryctl encrypt)");
    if (!file->db) REKEY_FAIL(SQLITE_ERROR, "PRAGMA rekey: the connection is unknown to the encryption VFS");
    if (!sqlite3_get_autocommit(file->db)) REKEY_FAIL(SQLITE_ERROR, "PRAGMA rekey: cannot rekey inside a transaction");
    sqlite3_int64 size = 0;
    int rc = file->real->pMethods->xFileSize(file->real, &size);
    if (rc != SQLITE_OK) return rc;
    Codec *next = codec_new(key, nKey, codec->version, codec->kdfIterations);
    if (!next) REKEY_FAIL(SQLITE_ERROR, "PRAGMA rekey: the new key is empty or malformed");
    next->plaintextHeaderSize = codec->plaintextHeaderSize;
    if (codec_set_page_size(next, codec->pageSize) != SQLITE_OK) { codec_free(next); REKEY_FAIL(SQLITE_ERROR, "PRAGMA rekey: the page size does not fit the plaintext header"); }
    if (size == 0) {
        // Nothing written yet: the new key simply replaces the old one.
        read_ahead_free(file);
        codec_free(file->codec);
        file->codec = next;
        return SQLITE_OK;
    }
    unsigned char header[100];
    rc = read_main(file, header, 100, 0);
    if (rc != SQLITE_OK) { codec_free(next); return rc; }
    if (header[18] == 2 || header[19] == 2) {
        codec_free(next);
        REKEY_FAIL(SQLITE_ERROR, "PRAGMA rekey: not supported in WAL mode, where other connections may still read pages under the old key; close them and use CipherDatabase.rekey(atPath:) or registryctl rekey, or switch to PRAGMA journal_mode = DELETE first");
    }
    if (!next->hasExplicitSalt) memcpy(next->salt, codec->salt, SALT_SIZE);
    next->hasSalt = 1;
    if (codec_derive(next) != SQLITE_OK) { codec_free(next); return SQLITE_ERROR; }
    read_ahead_free(file);
    file->rekeyCodec = next;
    file->playback = 0;
    char *error = NULL;
    rc = sqlite3_exec(file->db, "VACUUM", NULL, NULL, &error);
    file->rekeyCodec = NULL;
    if (rc == SQLITE_OK && !file->playback) {
        codec_free(file->codec);
        file->codec = next;
    } else {
        // Rolled back: every rewritten page went back under the old key.
        codec_free(next);
        if (rc == SQLITE_OK) rc = SQLITE_ERROR;
        if (message) *message = sqlite3_mprintf("PRAGMA rekey: %s; the database keeps its old key", error ? error : sqlite3_errstr(rc));
    }
    file->playback = 0;
    sqlite3_free(error);
    return rc;
#undef REKEY_FAIL
}

/// The page size a key set now would get: cipher_page_size, or the version's default.
static int requested_geometry(CipherFile *file, int *pageSize, int *reserve) {
    int version = file->codec ? file->codec->version : (file->requestedVersion ? file->requestedVersion : 4);
    *pageSize = file->codec ? file->codec->pageSize : (file->requestedPageSize ? file->requestedPageSize : (version == 4 ? 4096 : 1024));
    *reserve = version == 4 ? 80 : 48;
    return version;
}

static int pragma_control(CipherFile *file, char **args) {
    const char *name = args[1], *value = args[2];
    if (!name) return SQLITE_NOTFOUND;
    if (sqlite3_stricmp(name, "rekey") == 0) {
        if (!value) return pragma_error(args, "PRAGMA rekey needs a value: PRAGMA rekey = 'new passphrase'");
        return file_rekey(file, value, (int)strlen(value), &args[0]);
    }
    if (sqlite3_stricmp(name, "key") == 0 && value) {
        int pageSize, reserve;
        int version = requested_geometry(file, &pageSize, &reserve);
        int rc = set_file_key(file, value, (int)strlen(value), version, 0);
        if (rc != SQLITE_OK) return pragma_error(args, "PRAGMA key: the key is empty or malformed, or the plaintext header does not fit the page size");
        return SQLITE_OK;
    }
    if (sqlite3_stricmp(name, "page_size") == 0 && value && file->codec) {
        // SQLite would write pages of another size than the codec's: the
        // page size of an encrypted database is its cipher_page_size.
        char *end = NULL;
        long size = strtol(value, &end, 10);
        if (end != value && *end == '\0' && (size == file->codec->pageSize || (file->copyPageSize && size == file->copyPageSize))) return SQLITE_NOTFOUND;
        char *message = sqlite3_mprintf(
            "PRAGMA page_size: this database is encrypted with %d-byte pages, and an encrypted database can't change its page size in place; "
            "set PRAGMA cipher_page_size before the key is first used, or re-encrypt the file (CipherDatabase.rekey(atPath:) or registryctl rekey with a page size)",
            file->codec->pageSize);
        args[0] = message;
        return SQLITE_ERROR;
    }
    if (sqlite3_stricmp(name, "cipher_page_size") == 0) {
        int pageSize, reserve;
        requested_geometry(file, &pageSize, &reserve);
        if (!value) { args[0] = sqlite3_mprintf("%d", pageSize); return SQLITE_OK; }
        char *end = NULL;
        long size = strtol(value, &end, 10);
        if (end == value || *end != '\0' || !valid_page_size((int)size) || size != (int)size) {
            return pragma_error(args, "PRAGMA cipher_page_size: a power of two from 1024 to 65536 (SQLCipher's defaults: 1024 for version 3, 4096 for version 4; 512-byte pages leave fewer than the 480 usable bytes SQLite requires once IV and HMAC are reserved)");
        }
        if (file->codec && file->codec->derived) {
            return pragma_error(args, "PRAGMA cipher_page_size: set it before the first access to the database");
        }
        if (file->codec && codec_set_page_size(file->codec, (int)size) != SQLITE_OK) {
            return pragma_error(args, "PRAGMA cipher_page_size: the page would leave no room after the plaintext header (cipher_plaintext_header_size)");
        }
        file->requestedPageSize = (int)size;
        apply_geometry(file);
        return SQLITE_OK;
    }
    if (sqlite3_stricmp(name, "cipher_plaintext_header_size") == 0 && value) {
        int pageSize, reserve;
        requested_geometry(file, &pageSize, &reserve);
        char *end = NULL;
        long size = strtol(value, &end, 10);
        if (end == value || *end != '\0' || size < 0 || size % 16 != 0 || size >= pageSize - reserve) {
            return pragma_error(args, "PRAGMA cipher_plaintext_header_size: a multiple of 16 below the page's encrypted size (SQLCipher recommends 32), or 0");
        }
        // Bytes 48 and up of SQLite's header (the auto-vacuum flag at 52)
        // must be authenticated: a larger header would let anyone who can
        // write the file switch on the zero-page exemption.
        if (size > MAX_PLAINTEXT_HEADER) {
            return pragma_error(args, "PRAGMA cipher_plaintext_header_size: at most 48 bytes (SQLCipher recommends 32): a larger header leaves SQLite's auto-vacuum flag unauthenticated");
        }
        if (file->codec && file->codec->derived) {
            return pragma_error(args, "PRAGMA cipher_plaintext_header_size: set it before the first access to the database");
        }
        file->requestedHeaderSize = (int)size;
        if (file->codec) file->codec->plaintextHeaderSize = (int)size;
        return SQLITE_OK;
    }
    if (sqlite3_stricmp(name, "cipher_salt") == 0) {
        if (!value) {
            // The salt in use, x'<32 hex>': with a plaintext header the
            // file does not keep it, so the creator must.
            if (!file->codec) return pragma_error(args, "PRAGMA cipher_salt: the database has no key");
            int rc = load_salt(file);
            if (rc != SQLITE_OK) return rc;
            char hex[2 * SALT_SIZE + 4] = "x'";
            for (int i = 0; i < SALT_SIZE; i++) snprintf(hex + 2 + 2 * i, 3, "%02x", file->codec->salt[i]);
            strcat(hex, "'");
            args[0] = sqlite3_mprintf("%s", hex);
            return SQLITE_OK;
        }
        // x'<32 hex>', or the bare digits.
        int length = (int)strlen(value);
        const char *hex = length == 2 * SALT_SIZE + 3 ? blob_literal_digits(value, length)
            : length == 2 * SALT_SIZE ? value : NULL;
        unsigned char salt[SALT_SIZE];
        if (!hex || !parse_hex(hex, 2 * SALT_SIZE, salt)) return pragma_error(args, "PRAGMA cipher_salt: 16 bytes in hex, x'<32 hex digits>'");
        if (file->codec && file->codec->derived) {
            OPENSSL_cleanse(salt, SALT_SIZE);
            return pragma_error(args, "PRAGMA cipher_salt: set the salt before the first access to the database");
        }
        memcpy(file->requestedSalt, salt, SALT_SIZE);
        file->hasRequestedSalt = 1;
        if (file->codec) {
            memcpy(file->codec->salt, salt, SALT_SIZE);
            file->codec->hasExplicitSalt = 1;
            file->codec->hasSalt = 0;
        }
        OPENSSL_cleanse(salt, SALT_SIZE);
        return SQLITE_OK;
    }
    if (sqlite3_stricmp(name, "cipher_compatibility") == 0 && value) {
        int version = atoi(value);
        if (version != 3 && version != 4) return pragma_error(args, "PRAGMA cipher_compatibility: supported values are 3 and 4");
        if (file->codec && file->codec->derived && file->codec->version != version) {
            return pragma_error(args, "PRAGMA cipher_compatibility: set it before the first access to the database");
        }
        if (file->codec && file->codec->version != version) {
            // Before or after the key, as SQLCipher accepts both orders.
            Codec *codec = codec_with_version(file->codec, version);
            if (!codec) return pragma_error(args, "PRAGMA cipher_compatibility: the plaintext header does not fit that version's page geometry");
            read_ahead_free(file);
            codec_free(file->codec);
            file->codec = codec;
        } else if (!file->codec) {
            int pageSize = file->requestedPageSize ? file->requestedPageSize : (version == 4 ? 4096 : 1024);
            if (file->requestedHeaderSize >= pageSize - (version == 4 ? 80 : 48)) {
                return pragma_error(args, "PRAGMA cipher_compatibility: the plaintext header does not fit that version's page geometry");
            }
        }
        file->requestedVersion = version;
        apply_geometry(file);
        return SQLITE_OK;
    }
    return SQLITE_NOTFOUND;
}

HIDDEN int cipherFileControl(sqlite3_file *pFile, int op, void *pArg) {
    CipherFile *file = (CipherFile *)pFile;
    if (op == SQLITE_FCNTL_PDB && file->kind == KIND_MAIN) file->db = *(sqlite3 **)pArg;
    if (op == SQLITE_FCNTL_PRAGMA && file->kind == KIND_MAIN) {
        int rc = pragma_control(file, pArg);
        if (rc != SQLITE_NOTFOUND) return rc;
    }
    if (op == SQLITE_FCNTL_MMAP_SIZE && file->kind == KIND_MAIN && file->codec) {
        // A query (-1) passes; a new limit becomes 0 (see disable_mmap).
        sqlite3_int64 *limit = pArg;
        if (*limit > 0) *limit = 0;
    }
    return file->real->pMethods->xFileControl(file->real, op, pArg);
}
