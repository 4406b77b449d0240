// The public C API on connections (CSQLCipherVFS.h).

#include "Internal.h"

int grdbcipher_set_key(sqlite3 *db, const void *key, int nKey, int version, int kdfIterations) {
    CipherFile *file = main_file(db);
    if (!file) return SQLITE_MISUSE;
    if (!file->db) file->db = db;
    return set_file_key(file, key, nKey, version, kdfIterations);
}

int grdbcipher_allow_copy_page_size(sqlite3 *db, int pageSize) {
    CipherFile *file = main_file(db);
    if (!file || !file->codec || !valid_page_size(pageSize)) return SQLITE_MISUSE;
    file->copyPageSize = pageSize;
    return SQLITE_OK;
}

int grdbcipher_rekey(sqlite3 *db, const void *key, int nKey, char **message) {
    if (message) *message = NULL;
    CipherFile *file = main_file(db);
    if (!file || !key || nKey <= 0) return SQLITE_MISUSE;
    return file_rekey(file, key, nKey, message);
}

int grdbcipher_format(sqlite3 *db, int *version, int *pageSize, int *reserve, int *kdfIterations, int *plaintextHeaderSize, int *foundPageSize, int *foundReserve) {
    CipherFile *file = main_file(db);
    if (!file || !file->codec) return SQLITE_MISUSE;
    Codec *codec = file->codec;
    if (version) *version = codec->version;
    if (pageSize) *pageSize = codec->pageSize;
    if (reserve) *reserve = codec->reserve;
    if (kdfIterations) *kdfIterations = codec->hasRawKey ? 0 : codec->kdfIterations;
    if (plaintextHeaderSize) *plaintextHeaderSize = codec->plaintextHeaderSize;
    if (foundPageSize) *foundPageSize = codec->foundPageSize;
    if (foundReserve) *foundReserve = codec->foundReserve;
    return SQLITE_OK;
}

int grdbcipher_state(sqlite3 *db) {
    CipherFile *file = main_file(db);
    if (!file) return GRDBCIPHER_STATE_OK;
    if (!file->codec) return file->sawCiphertext ? GRDBCIPHER_STATE_ENCRYPTED_WITHOUT_KEY : GRDBCIPHER_STATE_OK;
    return file->codec->state;
}

long grdbcipher_read_ahead_pages(sqlite3 *db) {
    CipherFile *file = main_file(db);
    return file ? file->readAheadPages : 0;
}

int grdbcipher_failed_page(sqlite3 *db) {
    CipherFile *file = main_file(db);
    return file && file->codec ? file->codec->failedPage : 0;
}

int grdbcipher_file_is_plaintext(const char *path) {
    FILE *handle = fopen(path, "rb");
    if (!handle) return -1;
    unsigned char header[16];
    size_t count = fread(header, 1, 16, handle);
    fclose(handle);
    if (count == 0) return -1;
    return count == 16 && memcmp(header, SQLITE_MAGIC, 16) == 0;
}

int grdbcipher_verify_pages(sqlite3 *db, const unsigned int *superseded, int supersededCount) {
    CipherFile *file = main_file(db);
    if (!file || !file->codec) return -1;
    sqlite3_int64 size = 0;
    if (file->real->pMethods->xFileSize(file->real, &size) != SQLITE_OK) return -1;
    if (load_salt(file) != SQLITE_OK) return 1;
    Codec *codec = file->codec;
    if (codec_derive(codec) != SQLITE_OK) return -1;
    unsigned char *page = sqlite3_malloc(codec->pageSize);
    if (!page) return -1;
    int result = 0;
    int nextSuperseded = 0;
    // The HMAC of every page, checked here rather than through reads: an
    // all-zero page, which reads may accept as not yet written, is reported.
    for (sqlite3_int64 index = 0; index * codec->pageSize < size; index++) {
        unsigned int pgno = (unsigned int)(index + 1);
        // Pages ascend, and so does `superseded`: one pass over both.
        while (nextSuperseded < supersededCount && superseded[nextSuperseded] < pgno) nextSuperseded++;
        if (nextSuperseded < supersededCount && superseded[nextSuperseded] == pgno) continue;
        int rc = file->real->pMethods->xRead(file->real, page, codec->pageSize, index * codec->pageSize);
        if (rc != SQLITE_OK || page_is_zero(page, codec->pageSize)
            || page_decrypt(codec, codec->decryptor, pgno, page, page) != SQLITE_OK) {
            result = (int)pgno;
            break;
        }
    }
    OPENSSL_cleanse(page, codec->pageSize);
    sqlite3_free(page);
    return result;
}

int grdbcipher_distrust_schema(sqlite3 *db) {
    // sqlite3_db_config is variadic: Swift can't call it.
    int defensive = 0, trusted = 1;
    int rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, &defensive);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, &trusted);
    if (rc != SQLITE_OK) return rc;
    return defensive == 1 && trusted == 0 ? SQLITE_OK : SQLITE_ERROR;
}
