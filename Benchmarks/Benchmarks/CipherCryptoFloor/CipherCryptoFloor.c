#define OPENSSL_SUPPRESS_DEPRECATED
#include "CipherCryptoFloor.h"
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

#define RESERVE 80
#define IV_SIZE 16

long crypto_floor_pages(int count, int pageSize, int decrypt) {
    unsigned char key[32], hmacKey[32], iv[IV_SIZE];
    for (int i = 0; i < 32; i++) { key[i] = (unsigned char)i; hmacKey[i] = (unsigned char)(0x80 + i); }
    for (int i = 0; i < IV_SIZE; i++) iv[i] = (unsigned char)(7 * i);
    unsigned char pad[SHA512_CBLOCK];
    SHA512_CTX inner, outer;
    memset(pad, 0x36, sizeof(pad));
    for (int i = 0; i < 32; i++) pad[i] ^= hmacKey[i];
    SHA512_Init(&inner); SHA512_Update(&inner, pad, sizeof(pad));
    for (size_t i = 0; i < sizeof(pad); i++) pad[i] ^= 0x36 ^ 0x5c;
    SHA512_Init(&outer); SHA512_Update(&outer, pad, sizeof(pad));
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    // Every page in its own memory, as pages come from the OS page cache in
    // a scan: the floor includes reading them, not one page hot in L1.
    // Allocated and touched once, outside the measurement.
    static unsigned char *pages = NULL;
    static size_t pagesLength = 0;
    size_t length_ = (size_t)count * (size_t)pageSize;
    if (pagesLength < length_) {
        free(pages);
        pages = malloc(length_);
        pagesLength = pages ? length_ : 0;
        if (pages) memset(pages, 0x5a, length_);
    }
    unsigned char *out = malloc((size_t)pageSize);
    long checksum = 0;
    int ok = ctx && pages && out
        && EVP_CipherInit_ex(ctx, EVP_aes_256_cbc(), NULL, key, NULL, decrypt ? 0 : 1)
        && EVP_CIPHER_CTX_set_padding(ctx, 0);
    int end = pageSize - RESERVE;
    for (int pgno = 2; ok && pgno < count + 2; pgno++) {
        unsigned char *page = pages + (size_t)(pgno - 2) * (size_t)pageSize;
        unsigned char pgnoBytes[4] = { pgno & 0xff, (pgno >> 8) & 0xff, (pgno >> 16) & 0xff, (pgno >> 24) & 0xff };
        unsigned char digest[SHA512_DIGEST_LENGTH];
        int length = 0;
        SHA512_CTX hmac = inner;
        if (decrypt) {
            // HMAC first, then decryption, as a reader must.
            SHA512_Update(&hmac, page, (size_t)end + IV_SIZE);
        }
        ok = EVP_CipherInit_ex(ctx, NULL, NULL, NULL, iv, decrypt ? 0 : 1)
            && EVP_CipherUpdate(ctx, out, &length, page, end) && length == end;
        if (!decrypt) {
            memcpy(out + end, iv, IV_SIZE);
            SHA512_Update(&hmac, out, (size_t)end + IV_SIZE);
        }
        SHA512_Update(&hmac, pgnoBytes, 4);
        SHA512_Final(digest, &hmac);
        hmac = outer;
        SHA512_Update(&hmac, digest, sizeof(digest));
        SHA512_Final(digest, &hmac);
        checksum += out[pgno % end] + digest[pgno % SHA512_DIGEST_LENGTH];
    }
    EVP_CIPHER_CTX_free(ctx);
    free(out);
    return ok ? checksum : -1;
}
