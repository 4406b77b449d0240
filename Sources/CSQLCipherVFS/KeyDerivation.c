// Key derivation (PBKDF2) and the in-memory cache of derived keys.

#include "Internal.h"

typedef struct CacheEntry {
    struct CacheEntry *next;
    unsigned char digest[32];    // HMAC-SHA256 of passphrase, salt and parameters, under cacheKey
    unsigned char key[KEY_SIZE];
    int users;                   // codecs holding it (holdsCacheEntry)
} CacheEntry;

// At most this many derived keys are kept, the most recently used first.
// An entry lives while a connection of its file holds it: the connections
// of a pool, and a file opened again while open, skip PBKDF2; once the last
// one closes (or re-keys), the entry is wiped, so that a closed database's
// key does not stay in memory (review security-2, L4).
#define CACHE_LIMIT 64

static pthread_mutex_t cacheMutex = PTHREAD_MUTEX_INITIALIZER;
static CacheEntry *cacheHead = NULL;
static int cacheEnabled = 1;
static long kdfCount = 0;
// Entries are found by an HMAC under a random per-process key, not a plain
// hash: a memory dump does not let anyone test passphrase guesses at hash
// speed instead of PBKDF2's.
static unsigned char cacheKey[32];
static int cacheKeyReady = 0;

static void clear_cache_locked(void) {
    while (cacheHead) {
        CacheEntry *next = cacheHead->next;
        secret_free(cacheHead, sizeof(CacheEntry));
        cacheHead = next;
    }
}

void grdbcipher_set_kdf_cache(int enabled) {
    pthread_mutex_lock(&cacheMutex);
    cacheEnabled = enabled;
    if (!enabled) clear_cache_locked();
    pthread_mutex_unlock(&cacheMutex);
}

void grdbcipher_clear_kdf_cache(void) {
    pthread_mutex_lock(&cacheMutex);
    clear_cache_locked();
    pthread_mutex_unlock(&cacheMutex);
}

/// One codec holding the entry under `digest` is gone (freed, or replaced
/// by a re-key): the last one wipes it.
HIDDEN void kdf_cache_release(const unsigned char digest[32]) {
    pthread_mutex_lock(&cacheMutex);
    for (CacheEntry **link = &cacheHead; *link; link = &(*link)->next) {
        CacheEntry *entry = *link;
        if (CRYPTO_memcmp(entry->digest, digest, 32) == 0) {
            if (--entry->users <= 0) {
                *link = entry->next;
                secret_free(entry, sizeof(CacheEntry));
            }
            break;
        }
    }
    pthread_mutex_unlock(&cacheMutex);
}

long grdbcipher_kdf_cache_count(void) {
    pthread_mutex_lock(&cacheMutex);
    long count = 0;
    for (CacheEntry *entry = cacheHead; entry; entry = entry->next) count++;
    pthread_mutex_unlock(&cacheMutex);
    return count;
}

long grdbcipher_kdf_count(void) {
    pthread_mutex_lock(&cacheMutex);
    long count = kdfCount;
    pthread_mutex_unlock(&cacheMutex);
    return count;
}

/// The cache digest of the codec's passphrase, salt and parameters; 0 when
/// it can't be computed (the key is then derived, not cached). Called with
/// cacheMutex held.
static int cache_digest(const Codec *codec, unsigned char out[32]) {
    if (!cacheKeyReady) {
        if (RAND_bytes(cacheKey, sizeof(cacheKey)) != 1) return 0;
        cacheKeyReady = 1;
    }
    int parameters[2] = { codec->version, codec->kdfIterations };
    unsigned int length = 0;
    HMAC_CTX *ctx = HMAC_CTX_new();
    int ok = ctx && HMAC_Init_ex(ctx, cacheKey, sizeof(cacheKey), EVP_sha256(), NULL)
        && HMAC_Update(ctx, codec->passphrase, codec->passphraseLength)
        && HMAC_Update(ctx, codec->salt, SALT_SIZE)
        && HMAC_Update(ctx, (const unsigned char *)parameters, sizeof(parameters))
        && HMAC_Final(ctx, out, &length) && length == 32;
    HMAC_CTX_free(ctx);
    return ok;
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
        int found = 0, cacheable = 0;
        pthread_mutex_lock(&cacheMutex);
        if (cacheEnabled && (cacheable = cache_digest(codec, digest))) {
            for (CacheEntry **link = &cacheHead; *link; link = &(*link)->next) {
                CacheEntry *entry = *link;
                if (CRYPTO_memcmp(entry->digest, digest, 32) == 0) {
                    memcpy(codec->key, entry->key, KEY_SIZE);
                    if (!codec->holdsCacheEntry) {
                        entry->users++;
                        codec->holdsCacheEntry = 1;
                        memcpy(codec->cacheDigest, digest, 32);
                    }
                    // Most recently used first.
                    *link = entry->next;
                    entry->next = cacheHead;
                    cacheHead = entry;
                    found = 1;
                    break;
                }
            }
        }
        pthread_mutex_unlock(&cacheMutex);
        if (!found) {
            if (!PKCS5_PBKDF2_HMAC((const char *)codec->passphrase, codec->passphraseLength, codec->salt, SALT_SIZE,
                                   codec->kdfIterations, codec->md, KEY_SIZE, codec->key)) {
                OPENSSL_cleanse(digest, sizeof(digest));
                return SQLITE_ERROR;
            }
            pthread_mutex_lock(&cacheMutex);
            kdfCount++;
            if (cacheEnabled && cacheable) {
                CacheEntry *entry = secret_alloc(sizeof(CacheEntry));
                if (entry) {
                    memcpy(entry->digest, digest, 32);
                    memcpy(entry->key, codec->key, KEY_SIZE);
                    entry->users = 1;
                    codec->holdsCacheEntry = 1;
                    memcpy(codec->cacheDigest, digest, 32);
                    entry->next = cacheHead;
                    cacheHead = entry;
                    // Drop the least recently used beyond the limit.
                    int count = 0;
                    for (CacheEntry **link = &cacheHead; *link; link = &(*link)->next) {
                        if (++count > CACHE_LIMIT) {
                            CacheEntry *stale = *link;
                            *link = NULL;
                            while (stale) {
                                CacheEntry *next = stale->next;
                                secret_free(stale, sizeof(CacheEntry));
                                stale = next;
                            }
                            break;
                        }
                    }
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
    // A derivation that failed earlier may have left contexts behind.
    EVP_CIPHER_CTX_free(codec->encryptor);
    EVP_CIPHER_CTX_free(codec->decryptor);
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
