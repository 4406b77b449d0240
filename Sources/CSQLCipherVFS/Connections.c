// The public C API on connections (CSQLCipherVFS.h).

#include "Internal.h"

static CipherFile *main_file(sqlite3 *db) {
    sqlite3_file *file = NULL;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK || !file) return NULL;
    if (file->pMethods != &cipherMethods) return NULL;
    return (CipherFile *)file;
}

int grdbcipher_set_key(sqlite3 *db, const void *key, int nKey, int version, int kdfIterations) {
    CipherFile *file = main_file(db);
    if (!file) return SQLITE_MISUSE;
    return set_file_key(file, key, nKey, version, kdfIterations);
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

int grdbcipher_hmac_sha256(const void *key, int nKey, const void *message, int nMessage, unsigned char *out) {
    unsigned int length = 0;
    return HMAC(EVP_sha256(), key, nKey, message, (size_t)nMessage, out, &length) ? SQLITE_OK : SQLITE_ERROR;
}

int grdbcipher_verify_pages(sqlite3 *db) {
    CipherFile *file = main_file(db);
    if (!file || !file->codec) return -1;
    sqlite3_int64 size = 0;
    if (file->real->pMethods->xFileSize(file->real, &size) != SQLITE_OK) return -1;
    if (load_salt(file) != SQLITE_OK) return 1;
    Codec *codec = file->codec;
    unsigned char *page = sqlite3_malloc(codec->pageSize);
    if (!page) return -1;
    int result = 0;
    for (sqlite3_int64 index = 0; index * codec->pageSize < size; index++) {
        if (file->real->pMethods->xRead(file->real, page, codec->pageSize, index * codec->pageSize) != SQLITE_OK
            || codec_decrypt(codec, (unsigned int)(index + 1), page) != SQLITE_OK) {
            result = (int)(index + 1);
            break;
        }
    }
    OPENSSL_cleanse(page, codec->pageSize);
    sqlite3_free(page);
    return result;
}
