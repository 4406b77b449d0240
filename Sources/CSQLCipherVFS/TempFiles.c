// Temporary files (sorter spills, temporary databases and their journals,
// statement journals): AES-256-GCM under a random key per file, in blocks
// with a fresh nonce per write and the block number authenticated.

#include "Internal.h"

// SQLite reads and writes temporary files at any offset and length. The
// file is stored as blocks of TEMP_BLOCK bytes, each one on disk as
// [12-byte nonce | 4 zero bytes | ciphertext | 16-byte tag]: a rewrite of a
// block never reuses a keystream, and a modified block fails to decrypt
// (SQLITE_IOERR_READ) instead of reading as other plaintext. The logical
// size lives in memory: a temporary file belongs to one connection and is
// deleted when it closes.
#define TEMP_BLOCK 4096
#define TEMP_NONCE 12
#define TEMP_HEADER 16
#define TEMP_TAG 16
#define TEMP_PHYSICAL (TEMP_HEADER + TEMP_BLOCK + TEMP_TAG)

/// Encrypts (encrypt = 1) or checks and decrypts block `index`.
static int temp_block_cipher(CipherFile *file, int encrypt, sqlite3_int64 index, const unsigned char *in, unsigned char *out) {
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (!ctx) return SQLITE_NOMEM;
    unsigned char aad[8];
    for (int i = 0; i < 8; i++) aad[i] = (unsigned char)((sqlite3_uint64)index >> (8 * i));
    int length = 0, ok;
    if (encrypt) {
        // out: header, ciphertext, tag; in: the plaintext block.
        memset(out, 0, TEMP_HEADER);
        ok = RAND_bytes(out, TEMP_NONCE) == 1
            && EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL)
            && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, TEMP_NONCE, NULL)
            && EVP_EncryptInit_ex(ctx, NULL, NULL, file->tempKey, out)
            && EVP_EncryptUpdate(ctx, NULL, &length, aad, sizeof(aad))
            && EVP_EncryptUpdate(ctx, out + TEMP_HEADER, &length, in, TEMP_BLOCK) && length == TEMP_BLOCK
            && EVP_EncryptFinal_ex(ctx, out + TEMP_HEADER + TEMP_BLOCK, &length)
            && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TEMP_TAG, out + TEMP_HEADER + TEMP_BLOCK);
    } else {
        // in: the stored block; out: the plaintext block.
        ok = EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL)
            && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, TEMP_NONCE, NULL)
            && EVP_DecryptInit_ex(ctx, NULL, NULL, file->tempKey, in)
            && EVP_DecryptUpdate(ctx, NULL, &length, aad, sizeof(aad))
            && EVP_DecryptUpdate(ctx, out, &length, in + TEMP_HEADER, TEMP_BLOCK) && length == TEMP_BLOCK
            && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TEMP_TAG, (void *)(in + TEMP_HEADER + TEMP_BLOCK))
            && EVP_DecryptFinal_ex(ctx, out + length, &length);
    }
    EVP_CIPHER_CTX_free(ctx);
    if (ok) return SQLITE_OK;
    if (!encrypt) {
        OPENSSL_cleanse(out, TEMP_BLOCK);
        sqlite3_log(SQLITE_IOERR_READ, "grdbcipher: a block of a temporary file fails its authentication");
        return SQLITE_IOERR_READ;
    }
    return SQLITE_IOERR_WRITE;
}

/// Reads logical block `index` into `plain` (TEMP_BLOCK bytes): zeros when
/// it was never written.
static int temp_read_block(CipherFile *file, sqlite3_int64 index, unsigned char *stored, unsigned char *plain) {
    int rc = file->real->pMethods->xRead(file->real, stored, TEMP_PHYSICAL, index * TEMP_PHYSICAL);
    if (rc == SQLITE_IOERR_SHORT_READ) {
        // A block is written whole: a short one was never written.
        memset(plain, 0, TEMP_BLOCK);
        return SQLITE_OK;
    }
    if (rc != SQLITE_OK) return rc;
    return temp_block_cipher(file, 0, index, stored, plain);
}

HIDDEN int temp_read(CipherFile *file, unsigned char *out, int amount, sqlite3_int64 offset) {
    unsigned char *buffer = file_buffer(file, TEMP_PHYSICAL + TEMP_BLOCK);
    if (!buffer) return SQLITE_NOMEM;
    unsigned char *stored = buffer, *plain = buffer + TEMP_PHYSICAL;
    sqlite3_int64 end = offset + amount;
    sqlite3_int64 available = file->tempSize < end ? file->tempSize : end;
    memset(out, 0, (size_t)amount);
    for (sqlite3_int64 position = offset; position < available;) {
        sqlite3_int64 index = position / TEMP_BLOCK, blockStart = index * TEMP_BLOCK;
        sqlite3_int64 to = blockStart + TEMP_BLOCK < available ? blockStart + TEMP_BLOCK : available;
        int rc = temp_read_block(file, index, stored, plain);
        if (rc != SQLITE_OK) return rc;
        memcpy(out + (position - offset), plain + (position - blockStart), (size_t)(to - position));
        position = to;
    }
    OPENSSL_cleanse(plain, TEMP_BLOCK);
    return available < end ? SQLITE_IOERR_SHORT_READ : SQLITE_OK;
}

HIDDEN int temp_write(CipherFile *file, const unsigned char *in, int amount, sqlite3_int64 offset) {
    unsigned char *buffer = file_buffer(file, TEMP_PHYSICAL + TEMP_BLOCK);
    if (!buffer) return SQLITE_NOMEM;
    unsigned char *stored = buffer, *plain = buffer + TEMP_PHYSICAL;
    sqlite3_int64 end = offset + amount;
    int rc = SQLITE_OK;
    // Blocks between the old end and this write read as zeros.
    for (sqlite3_int64 position = offset; position < end && rc == SQLITE_OK;) {
        sqlite3_int64 index = position / TEMP_BLOCK, blockStart = index * TEMP_BLOCK;
        sqlite3_int64 to = blockStart + TEMP_BLOCK < end ? blockStart + TEMP_BLOCK : end;
        if (position > blockStart || to < blockStart + TEMP_BLOCK) {
            if (blockStart < file->tempSize) {
                rc = temp_read_block(file, index, stored, plain);
                if (rc != SQLITE_OK) break;
                // Bytes past the logical end (left by a truncation) are zeros.
                if (file->tempSize < blockStart + TEMP_BLOCK) memset(plain + (file->tempSize - blockStart), 0, (size_t)(blockStart + TEMP_BLOCK - file->tempSize));
            } else {
                memset(plain, 0, TEMP_BLOCK);
            }
        }
        memcpy(plain + (position - blockStart), in + (position - offset), (size_t)(to - position));
        rc = temp_block_cipher(file, 1, index, plain, stored);
        if (rc == SQLITE_OK) rc = file->real->pMethods->xWrite(file->real, stored, TEMP_PHYSICAL, index * TEMP_PHYSICAL);
        position = to;
    }
    OPENSSL_cleanse(plain, TEMP_BLOCK);
    if (rc == SQLITE_OK && end > file->tempSize) file->tempSize = end;
    return rc;
}

HIDDEN int temp_truncate(CipherFile *file, sqlite3_int64 size) {
    if (size < file->tempSize) file->tempSize = size;
    sqlite3_int64 blocks = (size + TEMP_BLOCK - 1) / TEMP_BLOCK;
    return file->real->pMethods->xTruncate(file->real, blocks * TEMP_PHYSICAL);
}
