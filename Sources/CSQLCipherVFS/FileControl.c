// File controls: PRAGMA key, rekey, cipher_compatibility,
// cipher_plaintext_header_size and cipher_salt.

#include "Internal.h"

HIDDEN int set_file_key(CipherFile *file, const void *key, int nKey, int version, int kdfIterations) {
    if (file->kind != KIND_MAIN) return SQLITE_MISUSE;
    Codec *codec = codec_new(key, nKey, version, kdfIterations);
    if (!codec) return SQLITE_MISUSE;
    codec->plaintextHeaderSize = file->requestedHeaderSize;
    if (file->hasRequestedSalt && !codec->hasExplicitSalt) {
        memcpy(codec->salt, file->requestedSalt, SALT_SIZE);
        codec->hasExplicitSalt = 1;
    }
    read_ahead_free(file);
    codec_free(file->codec);
    file->codec = codec;
    return SQLITE_OK;
}

/// Fails a pragma with a message SQLite reports as the statement's error.
static int pragma_error(char **args, const char *message) {
    args[0] = sqlite3_mprintf("%s", message);
    return SQLITE_ERROR;
}

/// PRAGMA rekey: rewrites every page under a new key in one transaction.
///
/// The rewrite is a VACUUM run on the connection, so SQLite's rollback
/// journal makes it atomic: journal pages keep the old key, pages written
/// to the database take the new one, and until the journal is gone a crash
/// or an error rolls the file back to the old key, page by page. The salt
/// is kept (unless the new key is a raw key with its own salt).
static int rekey(CipherFile *file, char **args, const char *value) {
    Codec *codec = file->codec;
    if (!codec) return pragma_error(args, "PRAGMA rekey: the database has no key; set it with PRAGMA key first (to encrypt a plain database, use CipherDatabase.encrypt or registryctl encrypt)");
    if (!file->db) return pragma_error(args, "PRAGMA rekey: the connection is unknown to the encryption VFS");
    if (!sqlite3_get_autocommit(file->db)) return pragma_error(args, "PRAGMA rekey: cannot rekey inside a transaction");
    sqlite3_int64 size = 0;
    int rc = file->real->pMethods->xFileSize(file->real, &size);
    if (rc != SQLITE_OK) return rc;
    Codec *next = codec_new(value, (int)strlen(value), codec->version, codec->kdfIterations);
    if (!next) return pragma_error(args, "PRAGMA rekey: the new key is empty or malformed");
    next->plaintextHeaderSize = codec->plaintextHeaderSize;
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
        return pragma_error(args, "PRAGMA rekey: not supported in WAL mode, where other connections may still read pages under the old key; close them and use CipherDatabase.rekey(atPath:) or registryctl rekey, or switch to PRAGMA journal_mode = DELETE first");
    }
    if (!next->hasExplicitSalt) memcpy(next->salt, codec->salt, SALT_SIZE);
    next->hasSalt = 1;
    if (codec_derive(next) != SQLITE_OK) { codec_free(next); return SQLITE_ERROR; }
    read_ahead_free(file);
    file->rekeyCodec = next;
    file->playback = 0;
    char *message = NULL;
    rc = sqlite3_exec(file->db, "VACUUM", NULL, NULL, &message);
    file->rekeyCodec = NULL;
    if (rc == SQLITE_OK && !file->playback) {
        codec_free(file->codec);
        file->codec = next;
    } else {
        // Rolled back: every rewritten page went back under the old key.
        codec_free(next);
        if (rc == SQLITE_OK) rc = SQLITE_ERROR;
        args[0] = sqlite3_mprintf("PRAGMA rekey: %s; the database keeps its old key", message ? message : sqlite3_errstr(rc));
    }
    file->playback = 0;
    sqlite3_free(message);
    return rc;
}

HIDDEN int cipherFileControl(sqlite3_file *pFile, int op, void *pArg) {
    CipherFile *file = (CipherFile *)pFile;
    if (op == SQLITE_FCNTL_PDB && file->kind == KIND_MAIN) file->db = *(sqlite3 **)pArg;
    if (op == SQLITE_FCNTL_PRAGMA && file->kind == KIND_MAIN) {
        char **args = pArg;
        const char *name = args[1], *value = args[2];
        if (name && sqlite3_stricmp(name, "rekey") == 0) {
            if (!value) return pragma_error(args, "PRAGMA rekey needs a value: PRAGMA rekey = 'new passphrase'");
            return rekey(file, args, value);
        }
        if (name && sqlite3_stricmp(name, "key") == 0 && value) {
            int version = file->codec ? file->codec->version : (file->requestedVersion ? file->requestedVersion : 4);
            return set_file_key(file, value, (int)strlen(value), version, 0);
        }
        if (name && sqlite3_stricmp(name, "cipher_plaintext_header_size") == 0 && value) {
            char *end = NULL;
            long size = strtol(value, &end, 10);
            int limit = file->codec ? file->codec->pageSize - file->codec->reserve : 1024 - 48;
            if (end == value || *end != '\0' || size < 0 || size % 16 != 0 || size >= limit) {
                return pragma_error(args, "PRAGMA cipher_plaintext_header_size: a multiple of 16 below the page's encrypted size (SQLCipher recommends 32), or 0");
            }
            if (file->codec && file->codec->derived) {
                return pragma_error(args, "PRAGMA cipher_plaintext_header_size: set it before the first access to the database");
            }
            file->requestedHeaderSize = (int)size;
            if (file->codec) file->codec->plaintextHeaderSize = (int)size;
            return SQLITE_OK;
        }
        if (name && sqlite3_stricmp(name, "cipher_salt") == 0) {
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
        if (name && sqlite3_stricmp(name, "cipher_compatibility") == 0 && value) {
            int version = atoi(value);
            if (version != 3 && version != 4) return pragma_error(args, "PRAGMA cipher_compatibility: supported values are 3 and 4");
            // Before or after the key, as SQLCipher accepts both orders.
            file->requestedVersion = version;
            if (file->codec && file->codec->version != version) {
                Codec *codec = codec_with_version(file->codec, version);
                if (!codec) return SQLITE_NOMEM;
                read_ahead_free(file);
                codec_free(file->codec);
                file->codec = codec;
            }
            return SQLITE_OK;
        }
    }
    return file->real->pMethods->xFileControl(file->real, op, pArg);
}
