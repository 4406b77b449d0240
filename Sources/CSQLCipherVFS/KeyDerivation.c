// Key derivation (PBKDF2) and the in-memory cache of derived keys.

#include "Internal.h"

typedef struct CacheEntry {
    struct CacheEntry *next;
    unsigned char digest[32];    // SHA-256 of passphrase, salt and parameters
    unsigned char key[KEY_SIZE];
} CacheEntry;

static pthread_mutex_t cacheMutex = PTHREAD_MUTEX_INITIALIZER;
static CacheEntry *cacheHead = NULL;
static int cacheEnabled = 1;
static long kdfCount = 0;

void grdbcipher_set_kdf_cache(int enabled) {
    pthread_mutex_lock(&cacheMutex);
    cacheEnabled = enabled;
    pthread_mutex_unlock(&cacheMutex);
}

void grdbcipher_clear_kdf_cache(void) {
    pthread_mutex_lock(&cacheMutex);
    while (cacheHead) {
        CacheEntry *next = cacheHead->next;
        OPENSSL_cleanse(cacheHead, sizeof(CacheEntry));
        free(cacheHead);
        cacheHead = next;
    }
    pthread_mutex_unlock(&cacheMutex);
}

long grdbcipher_kdf_count(void) {
    pthread_mutex_lock(&cacheMutex);
    long count = kdfCount;
    pthread_mutex_unlock(&cacheMutex);
    return count;
}

static void cache_digest(const Codec *codec, unsigned char out[32]) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int length = 0;
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    EVP_DigestUpdate(ctx, codec->passphrase, codec->passphraseLength);
    EVP_DigestUpdate(ctx, codec->salt, SALT_SIZE);
    int parameters[2] = { codec->version, codec->kdfIterations };
    EVP_DigestUpdate(ctx, parameters, sizeof(parameters));
    EVP_DigestFinal_ex(ctx, out, &length);
    EVP_MD_CTX_free(ctx);
}

/// Hashes the HMAC key's inner and outer pad blocks once (RFC 2104), so that
/// a page's HMAC only hashes the page and the two digests.
static int hmac_prepare(Codec *codec) {
    unsigned char pad[SHA512_CBLOCK];
    int block = codec->version == 4 ? SHA512_CBLOCK : SHA_CBLOCK;
    int ok;
    memset(pad, 0x36, sizeof(pad));
    for (int i = 0; i < KEY_SIZE; i++) pad[i] ^= codec->hmacKey[i];
    ok = codec->version == 4
        ? SHA512_Init(&codec->hmacInner.sha512) && SHA512_Update(&codec->hmacInner.sha512, pad, block)
        : SHA1_Init(&codec->hmacInner.sha1) && SHA1_Update(&codec->hmacInner.sha1, pad, block);
    for (int i = 0; i < block; i++) pad[i] ^= 0x36 ^ 0x5c;
    ok = ok && (codec->version == 4
        ? SHA512_Init(&codec->hmacOuter.sha512) && SHA512_Update(&codec->hmacOuter.sha512, pad, block)
        : SHA1_Init(&codec->hmacOuter.sha1) && SHA1_Update(&codec->hmacOuter.sha1, pad, block));
    OPENSSL_cleanse(pad, sizeof(pad));
    return ok;
}

/// Derives the encryption and HMAC keys, once the salt is known.
HIDDEN int codec_derive(Codec *codec) {
    if (codec->derived) return SQLITE_OK;
    if (!codec->hasSalt) return SQLITE_ERROR;
    if (!codec->hasRawKey) {
        unsigned char digest[32];
        int found = 0;
        cache_digest(codec, digest);
        pthread_mutex_lock(&cacheMutex);
        if (cacheEnabled) {
            for (CacheEntry *entry = cacheHead; entry; entry = entry->next) {
                if (CRYPTO_memcmp(entry->digest, digest, 32) == 0) {
                    memcpy(codec->key, entry->key, KEY_SIZE);
                    found = 1;
                    break;
                }
            }
        }
        pthread_mutex_unlock(&cacheMutex);
        if (!found) {
            if (!PKCS5_PBKDF2_HMAC((const char *)codec->passphrase, codec->passphraseLength, codec->salt, SALT_SIZE,
                                   codec->kdfIterations, codec->md, KEY_SIZE, codec->key)) {
                return SQLITE_ERROR;
            }
            pthread_mutex_lock(&cacheMutex);
            kdfCount++;
            if (cacheEnabled) {
                CacheEntry *entry = malloc(sizeof(CacheEntry));
                if (entry) {
                    memcpy(entry->digest, digest, 32);
                    memcpy(entry->key, codec->key, KEY_SIZE);
                    entry->next = cacheHead;
                    cacheHead = entry;
                }
            }
            pthread_mutex_unlock(&cacheMutex);
        }
        OPENSSL_cleanse(digest, sizeof(digest));
    }
    unsigned char hmacSalt[SALT_SIZE];
    for (int i = 0; i < SALT_SIZE; i++) hmacSalt[i] = codec->salt[i] ^ 0x3a;
    if (!PKCS5_PBKDF2_HMAC((const char *)codec->key, KEY_SIZE, hmacSalt, SALT_SIZE, 2, codec->md, KEY_SIZE, codec->hmacKey)) {
        return SQLITE_ERROR;
    }
    codec->encryptor = EVP_CIPHER_CTX_new();
    codec->decryptor = EVP_CIPHER_CTX_new();
    if (!codec->encryptor || !codec->decryptor
        || !EVP_EncryptInit_ex(codec->encryptor, EVP_aes_256_cbc(), NULL, codec->key, NULL)
        || !EVP_DecryptInit_ex(codec->decryptor, EVP_aes_256_cbc(), NULL, codec->key, NULL)
        || !EVP_CIPHER_CTX_set_padding(codec->encryptor, 0)
        || !EVP_CIPHER_CTX_set_padding(codec->decryptor, 0)
        || !hmac_prepare(codec)) {
        return SQLITE_ERROR;
    }
    codec->derived = 1;
    return SQLITE_OK;
}
