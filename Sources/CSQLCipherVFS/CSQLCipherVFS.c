// An SQLite VFS that reads and writes databases in the SQLCipher file format.
//
// Main database pages, rollback journal pages and WAL frame pages of a keyed
// database are encrypted with the SQLCipher page codec (AES-256-CBC, HMAC,
// PBKDF2 key derivation; v3 and v4 parameters). Journal and WAL headers stay
// plain, as in SQLCipher. Temporary files (sorter spills, temp databases,
// statement journals) are encrypted with AES-256-CTR and an ephemeral random
// key, so that no plaintext reaches the disk.

#include "CSQLCipherVFS.h"

// The page HMAC uses OpenSSL's SHA-1 and SHA-512 block functions directly,
// which OpenSSL 3 marks deprecated (still exported, same assembly). Its
// HMAC and EVP digest APIs allocate a provider context on every reset or
// copy, which costs more than hashing a 4 KB page.
#define OPENSSL_SUPPRESS_DEPRECATED

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SALT_SIZE 16
#define KEY_SIZE 32
#define IV_SIZE 16
#define MAX_RESERVE 80

static const unsigned char SQLITE_MAGIC[16] = "SQLite format 3";

// MARK: - Codec

typedef struct Codec {
    int version;                 // 3 or 4
    int pageSize;                // 1024 (v3) or 4096 (v4)
    int reserve;                 // 48 (v3) or 80 (v4)
    int hmacSize;                // 20 (v3) or 64 (v4)
    int kdfIterations;
    const EVP_MD *md;            // SHA1 (v3) or SHA512 (v4)
    unsigned char *passphrase;   // NULL for a raw key
    int passphraseLength;
    int hasRawKey;
    int hasExplicitSalt;
    unsigned char salt[SALT_SIZE];
    int hasSalt;
    unsigned char key[KEY_SIZE];
    unsigned char hmacKey[KEY_SIZE];
    int derived;
    int failedPage;              // last page whose HMAC check failed
    int state;                   // GRDBCIPHER_STATE_*
    // Contexts keyed once, reused for every page: a codec serves one
    // connection, which SQLite never uses from two threads at once.
    EVP_CIPHER_CTX *encryptor;
    EVP_CIPHER_CTX *decryptor;
    // HMAC digest states after the inner (key XOR ipad) and outer (key XOR
    // opad) blocks: each page's HMAC starts from copies of them.
    union { SHA512_CTX sha512; SHA_CTX sha1; } hmacInner, hmacOuter;
    // Random bytes for IVs and padding, drawn from OpenSSL in batches: one
    // RAND_bytes call per page cost about as much as a fifth of the page's
    // AES encryption. `randomUsed` bytes of the pool are spent.
    unsigned char randomPool[2048];
    int randomUsed;
    unsigned long randomGeneration;
} Codec;

// Incremented in the child of every fork(): a codec's random pool drawn
// before a fork is never used after it, so parent and child cannot write
// pages with the same IV (SQLite forbids carrying a connection across
// fork(), this makes a violation fail safe rather than reuse IVs).
static volatile unsigned long forkGeneration = 1;
static void note_fork_in_child(void) { forkGeneration++; }
static pthread_once_t forkHandlerOnce = PTHREAD_ONCE_INIT;
static void install_fork_handler(void) { pthread_atfork(NULL, NULL, note_fork_in_child); }

/// Fills `out` with `length` random bytes (at most the pool's size) from
/// the codec's pool, refilling it from OpenSSL's CSPRNG when spent.
static int codec_random(Codec *codec, unsigned char *out, int length) {
    if (length > (int)sizeof(codec->randomPool)) return RAND_bytes(out, length) == 1 ? SQLITE_OK : SQLITE_ERROR;
    if (codec->randomGeneration != forkGeneration || codec->randomUsed + length > (int)sizeof(codec->randomPool)) {
        pthread_once(&forkHandlerOnce, install_fork_handler);
        if (RAND_bytes(codec->randomPool, sizeof(codec->randomPool)) != 1) return SQLITE_ERROR;
        codec->randomUsed = 0;
        codec->randomGeneration = forkGeneration;
    }
    memcpy(out, codec->randomPool + codec->randomUsed, length);
    // Spent bytes are wiped: the pool never holds an IV already on disk.
    OPENSSL_cleanse(codec->randomPool + codec->randomUsed, length);
    codec->randomUsed += length;
    return SQLITE_OK;
}

static void codec_free(Codec *codec) {
    if (!codec) return;
    EVP_CIPHER_CTX_free(codec->encryptor);
    EVP_CIPHER_CTX_free(codec->decryptor);
    if (codec->passphrase) {
        OPENSSL_cleanse(codec->passphrase, codec->passphraseLength);
        free(codec->passphrase);
    }
    OPENSSL_cleanse(codec, sizeof(Codec));
    free(codec);
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int parse_hex(const char *hex, int length, unsigned char *out) {
    for (int i = 0; i < length / 2; i++) {
        int high = hex_value(hex[2 * i]), low = hex_value(hex[2 * i + 1]);
        if (high < 0 || low < 0) return 0;
        out[i] = (unsigned char)(high * 16 + low);
    }
    return 1;
}

static void codec_set_version(Codec *codec, int version, int kdfIterations) {
    codec->version = version;
    if (version == 4) {
        codec->pageSize = 4096; codec->reserve = 80; codec->hmacSize = 64;
        codec->kdfIterations = 256000; codec->md = EVP_sha512();
    } else {
        codec->pageSize = 1024; codec->reserve = 48; codec->hmacSize = 20;
        codec->kdfIterations = 64000; codec->md = EVP_sha1();
    }
    if (kdfIterations > 0) codec->kdfIterations = kdfIterations;
}

static Codec *codec_new(const void *key, int nKey, int version, int kdfIterations) {
    if (!key || nKey <= 0 || (version != 3 && version != 4)) return NULL;
    Codec *codec = calloc(1, sizeof(Codec));
    if (!codec) return NULL;
    codec_set_version(codec, version, kdfIterations);
    const char *text = key;
    // x'<64 hex>' or x'<64 hex><32 hex>': a raw key (and salt).
    if ((nKey == 67 || nKey == 99) && (text[0] == 'x' || text[0] == 'X') && text[1] == '\'' && text[nKey - 1] == '\'') {
        if (!parse_hex(text + 2, 64, codec->key)) { codec_free(codec); return NULL; }
        if (nKey == 99) {
            if (!parse_hex(text + 66, 32, codec->salt)) { codec_free(codec); return NULL; }
            codec->hasExplicitSalt = 1;
        }
        codec->hasRawKey = 1;
        return codec;
    }
    codec->passphrase = malloc(nKey);
    if (!codec->passphrase) { codec_free(codec); return NULL; }
    memcpy(codec->passphrase, key, nKey);
    codec->passphraseLength = nKey;
    return codec;
}

/// The same key (passphrase, or raw key and salt) with another format
/// version's parameters, not yet derived.
static Codec *codec_with_version(const Codec *source, int version) {
    if (source->passphrase) return codec_new(source->passphrase, source->passphraseLength, version, 0);
    Codec *codec = calloc(1, sizeof(Codec));
    if (!codec) return NULL;
    codec_set_version(codec, version, 0);
    memcpy(codec->key, source->key, KEY_SIZE);
    codec->hasRawKey = 1;
    if (source->hasExplicitSalt) {
        memcpy(codec->salt, source->salt, SALT_SIZE);
        codec->hasExplicitSalt = 1;
    }
    return codec;
}

// MARK: Derived key cache

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
static int codec_derive(Codec *codec) {
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

/// HMAC of `data` followed by the page number (4 bytes, little-endian).
static int page_hmac(const Codec *codec, const unsigned char *data, int length, unsigned int pgno, unsigned char *out) {
    unsigned char pgnoBytes[4] = { pgno & 0xff, (pgno >> 8) & 0xff, (pgno >> 16) & 0xff, (pgno >> 24) & 0xff };
    unsigned char inner[SHA512_DIGEST_LENGTH];
    int ok;
    if (codec->version == 4) {
        SHA512_CTX ctx = codec->hmacInner.sha512;
        ok = SHA512_Update(&ctx, data, length) && SHA512_Update(&ctx, pgnoBytes, 4) && SHA512_Final(inner, &ctx);
        ctx = codec->hmacOuter.sha512;
        ok = ok && SHA512_Update(&ctx, inner, SHA512_DIGEST_LENGTH) && SHA512_Final(out, &ctx);
        OPENSSL_cleanse(&ctx, sizeof(ctx));
    } else {
        SHA_CTX ctx = codec->hmacInner.sha1;
        ok = SHA1_Update(&ctx, data, length) && SHA1_Update(&ctx, pgnoBytes, 4) && SHA1_Final(inner, &ctx);
        ctx = codec->hmacOuter.sha1;
        ok = ok && SHA1_Update(&ctx, inner, SHA_DIGEST_LENGTH) && SHA1_Final(out, &ctx);
        OPENSSL_cleanse(&ctx, sizeof(ctx));
    }
    return ok ? SQLITE_OK : SQLITE_ERROR;
}

/// AES-256-CBC without padding; `out` may be `in` (OpenSSL supports
/// in-place CBC).
static int aes_cbc(EVP_CIPHER_CTX *ctx, int encrypt, const unsigned char *iv, const unsigned char *in, int length, unsigned char *out) {
    int outLength = 0;
    // Only the IV changes: the key schedule set at derivation is kept.
    // Lengths are whole blocks, so there is nothing to finalize.
    int ok = EVP_CipherInit_ex(ctx, NULL, NULL, NULL, iv, encrypt)
        && EVP_CipherUpdate(ctx, out, &outLength, in, length)
        && outLength == length;
    return ok ? SQLITE_OK : SQLITE_ERROR;
}

/// Encrypts one page: [salt on page 1 | ciphertext | IV | HMAC | random].
static int codec_encrypt(Codec *codec, unsigned int pgno, const unsigned char *in, unsigned char *out) {
    int rc = codec_derive(codec);
    if (rc != SQLITE_OK) return rc;
    int offset = pgno == 1 ? SALT_SIZE : 0;
    int end = codec->pageSize - codec->reserve;
    unsigned char *iv = out + end;
    // The IV, and for v3 the padding after the HMAC (v4's HMAC fills the
    // reserve).
    if (codec_random(codec, iv, IV_SIZE) != SQLITE_OK) return SQLITE_ERROR;
    int padding = codec->reserve - IV_SIZE - codec->hmacSize;
    if (padding > 0 && codec_random(codec, iv + IV_SIZE + codec->hmacSize, padding) != SQLITE_OK) return SQLITE_ERROR;
    if (aes_cbc(codec->encryptor, 1, iv, in + offset, end - offset, out + offset) != SQLITE_OK) return SQLITE_ERROR;
    if (page_hmac(codec, out + offset, end - offset + IV_SIZE, pgno, out + end + IV_SIZE) != SQLITE_OK) return SQLITE_ERROR;
    if (pgno == 1) memcpy(out, codec->salt, SALT_SIZE);
    return SQLITE_OK;
}

/// Checks the HMAC of the page `in` and decrypts it into `out` (which may
/// be `in`) with `decryptor`, keyed with the codec's key: SQLITE_OK, or
/// SQLITE_CORRUPT when the HMAC does not match. Reads the codec only, so
/// read-ahead workers can use it.
static int page_decrypt(const Codec *codec, EVP_CIPHER_CTX *decryptor, unsigned int pgno, const unsigned char *in, unsigned char *out) {
    int offset = pgno == 1 ? SALT_SIZE : 0;
    int end = codec->pageSize - codec->reserve;
    unsigned char expected[SHA512_DIGEST_LENGTH];
    if (page_hmac(codec, in + offset, end - offset + IV_SIZE, pgno, expected) != SQLITE_OK) return SQLITE_ERROR;
    if (CRYPTO_memcmp(expected, in + end + IV_SIZE, codec->hmacSize) != 0) {
        // An all-zero page is a page SQLite has not written yet (a hole).
        for (int i = 0; i < codec->pageSize; i++) if (in[i]) return SQLITE_CORRUPT;
        if (out != in) memset(out, 0, codec->pageSize);
        return SQLITE_OK;
    }
    if (aes_cbc(decryptor, 0, in + end, in + offset, end - offset, out + offset) != SQLITE_OK) return SQLITE_ERROR;
    if (pgno == 1) memcpy(out, SQLITE_MAGIC, SALT_SIZE);
    // SQLite hands back what it reads when it writes a page, and WAL
    // checksums cover the whole page: reserved bytes must read the same
    // every time (zeros), not as this write's IV and HMAC.
    memset(out + end, 0, codec->reserve);
    return SQLITE_OK;
}

/// Decrypts one page in place; SQLITE_NOTADB (page 1: a wrong key) or
/// SQLITE_CORRUPT when the HMAC fails.
static int codec_decrypt(Codec *codec, unsigned int pgno, unsigned char *page) {
    int rc = codec_derive(codec);
    if (rc != SQLITE_OK) return rc;
    rc = page_decrypt(codec, codec->decryptor, pgno, page, page);
    if (rc == SQLITE_CORRUPT) {
        codec->failedPage = (int)pgno;
        if (pgno == 1) {
            codec->state = GRDBCIPHER_STATE_WRONG_KEY;
            return SQLITE_NOTADB;
        }
        codec->state = GRDBCIPHER_STATE_CORRUPT_PAGE;
        sqlite3_log(SQLITE_CORRUPT, "grdbcipher: HMAC check failed for page %u", pgno);
    }
    return rc;
}

// MARK: - Pending keys (VACUUM INTO targets)

typedef struct PendingKey {
    struct PendingKey *next;
    char *path;
    Codec *codec;               // NULL: explicitly plain
} PendingKey;

static pthread_mutex_t pendingMutex = PTHREAD_MUTEX_INITIALIZER;
static PendingKey *pendingHead = NULL;

int grdbcipher_set_pending_key(const char *path, const void *key, int nKey, int version, int kdfIterations) {
    PendingKey *pending = calloc(1, sizeof(PendingKey));
    if (!pending) return SQLITE_NOMEM;
    pending->path = strdup(path);
    if (key) {
        pending->codec = codec_new(key, nKey, version, kdfIterations);
        if (!pending->codec) { free(pending->path); free(pending); return SQLITE_MISUSE; }
    }
    pthread_mutex_lock(&pendingMutex);
    pending->next = pendingHead;
    pendingHead = pending;
    pthread_mutex_unlock(&pendingMutex);
    return SQLITE_OK;
}

/// Takes the pending key of `path`, if any: 1 and the codec (maybe NULL).
static int take_pending_key(const char *path, Codec **codec) {
    int found = 0;
    pthread_mutex_lock(&pendingMutex);
    for (PendingKey **link = &pendingHead; *link; link = &(*link)->next) {
        if (strcmp((*link)->path, path) == 0) {
            PendingKey *pending = *link;
            *link = pending->next;
            *codec = pending->codec;
            free(pending->path);
            free(pending);
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&pendingMutex);
    return found;
}

// MARK: - Files

enum Kind { KIND_MAIN, KIND_JOURNAL, KIND_WAL, KIND_TEMP, KIND_OTHER };

typedef struct CipherFile {
    sqlite3_file base;
    sqlite3_file *real;
    int kind;
    Codec *codec;                       // main databases only (owned)
    struct CipherFile *mainFile;        // journals and WAL: their database
    unsigned int lastPgno;              // journals: page number of the record being read or written
    sqlite3_int64 lastPgnoOffset;       // journals: where that page number is
    int sawCiphertext;                  // unkeyed main databases: the header is not SQLite's
    int requestedVersion;               // main databases: PRAGMA cipher_compatibility, 0 if none
    unsigned char *buffer;              // scratch for pages and frames, wiped on close
    int bufferSize;
    unsigned char tempKey[KEY_SIZE];    // temporary files: ephemeral CTR key
    unsigned int lastReadPgno;          // main databases: sequential read detection
    int sequentialReads;
    struct ReadAhead *readAhead;        // main databases: pages decrypted ahead, or NULL
    long readAheadPages;                // main databases: pages taken from read-ahead
    sqlite3 *db;                        // main databases: the connection (SQLITE_FCNTL_PDB)
    Codec *rekeyCodec;                  // main databases: the new key during PRAGMA rekey
    int playback;                       // main databases: SQLite is rolling back from the journal
    // Journals: the record whose checksum comes next, and the sums of its
    // checksummed bytes in plaintext and in ciphertext.
    sqlite3_int64 recordOffset;
    unsigned int recordPlainSum, recordCipherSum;
    int recordBad;
    // WAL: a frame header written but not yet checksummed over ciphertext,
    // the byte order of checksums, and the checksum chains (ciphertext, and
    // plaintext as SQLite sees it) up to the last frame read in order.
    unsigned char walHeader[24];
    sqlite3_int64 walHeaderOffset;      // -1: none pending
    int walByteOrder;                   // 0 unknown, 1 little-endian, 2 big-endian
    sqlite3_int64 walChainOffset;       // offset of the last frame in the chains, or -1
    unsigned int walCipherSum[2], walPlainSum[2];
} CipherFile;

// MARK: - Read-ahead
//
// A sequential scan of an encrypted database spends more time checking
// HMACs (SHA-512 for v4: about 1.5x what SQLite spends on a page) than
// anything else. Once a connection reads several consecutive pages, worker
// threads read, check and decrypt the pages that follow while SQLite works
// on the current one. The connection takes a prefetched page only if the
// page's IV and HMAC on disk are still those of the bytes that were checked
// (read_ahead_take); otherwise it reads and decrypts the page itself, with
// the same errors as without read-ahead. Workers never hold up a reader: a
// page still being worked on is decrypted again by the reader. Plaintext in
// the window is wiped when the connection closes or changes its key.

#define READAHEAD_WINDOW 32              // pages decrypted ahead of a reader
#define READAHEAD_TRIGGER 4              // consecutive pages before it starts
#define READAHEAD_QUEUE 4096             // jobs waiting for all connections

enum SlotState { SLOT_EMPTY, SLOT_QUEUED, SLOT_RUNNING, SLOT_READY };

typedef struct ReadAheadSlot {
    unsigned int pgno;
    int state;
    unsigned char *ciphertext;
    unsigned char *plaintext;
} ReadAheadSlot;

typedef struct ReadAhead {
    pthread_mutex_t mutex;               // guards slot states and page numbers
    pthread_cond_t changed;              // a slot left SLOT_RUNNING
    CipherFile *file;
    Codec *codec;                        // the file's, derived, unchanged while this exists
    int pageSize;
    unsigned int scheduledThrough;       // last page put in the window
    sqlite3_int64 pageCount;             // file size when last checked, in pages
    ReadAheadSlot slots[READAHEAD_WINDOW];
    unsigned char *memory;
} ReadAhead;

typedef struct ReadAheadJob { ReadAhead *readAhead; int slot; } ReadAheadJob;

// One stack of jobs for every connection, served by a few detached threads
// started on first use. Workers take the newest job, the page furthest
// ahead of its reader: a reader that catches up decrypts the near pages
// itself instead of waiting, and finds the far ones ready when it gets
// there. Lock order: queueMutex, then a ReadAhead's mutex.
static pthread_mutex_t queueMutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queueNotEmpty = PTHREAD_COND_INITIALIZER;
static ReadAheadJob queue[READAHEAD_QUEUE];
static unsigned long queueHead = 0, queueTail = 0;
static int readAheadEnabled = 1;
static int workerCount = 0;

/// A worker's AES context, keyed with the key of the last job.
typedef struct WorkerCipher {
    EVP_CIPHER_CTX *decryptor;
    unsigned char key[KEY_SIZE];
    int keyed;
} WorkerCipher;

static int prefetch(ReadAhead *readAhead, ReadAheadSlot *slot, unsigned int pgno, WorkerCipher *cipher) {
    sqlite3_file *real = readAhead->file->real;
    int pageSize = readAhead->pageSize;
    // pread(2) on the connection's descriptor: the unix VFS keeps no
    // per-read state on success, and the connection never closes the file
    // while a job runs (read_ahead_free waits).
    if (real->pMethods->xRead(real, slot->ciphertext, pageSize, (sqlite3_int64)(pgno - 1) * pageSize) != SQLITE_OK) return 0;
    if (!cipher->keyed || CRYPTO_memcmp(cipher->key, readAhead->codec->key, KEY_SIZE) != 0) {
        cipher->keyed = EVP_DecryptInit_ex(cipher->decryptor, EVP_aes_256_cbc(), NULL, readAhead->codec->key, NULL)
            && EVP_CIPHER_CTX_set_padding(cipher->decryptor, 0);
        if (!cipher->keyed) return 0;
        memcpy(cipher->key, readAhead->codec->key, KEY_SIZE);
    }
    return page_decrypt(readAhead->codec, cipher->decryptor, pgno, slot->ciphertext, slot->plaintext) == SQLITE_OK;
}

/// Forgets the key: the context's key schedule and the copy of the key.
static void worker_cipher_wipe(WorkerCipher *cipher) {
    if (cipher->decryptor) EVP_CIPHER_CTX_reset(cipher->decryptor);
    OPENSSL_cleanse(cipher->key, KEY_SIZE);
    cipher->keyed = 0;
}

static void *read_ahead_worker(void *unused) {
    WorkerCipher cipher = { EVP_CIPHER_CTX_new(), { 0 }, 0 };
    for (;;) {
        pthread_mutex_lock(&queueMutex);
        while (queueHead == queueTail) {
            if (cipher.keyed) {
                // Out of work: no key outlives the jobs that needed it (its
                // connection may close while this thread sleeps).
                pthread_mutex_unlock(&queueMutex);
                worker_cipher_wipe(&cipher);
                pthread_mutex_lock(&queueMutex);
                continue;
            }
            pthread_cond_wait(&queueNotEmpty, &queueMutex);
        }
        queueTail--;
        ReadAheadJob job = queue[queueTail % READAHEAD_QUEUE];
        ReadAhead *readAhead = job.readAhead;
        if (!readAhead) { pthread_mutex_unlock(&queueMutex); continue; }
        pthread_mutex_lock(&readAhead->mutex);
        ReadAheadSlot *slot = &readAhead->slots[job.slot];
        int run = slot->state == SLOT_QUEUED;
        unsigned int pgno = slot->pgno;
        if (run) slot->state = SLOT_RUNNING;
        pthread_mutex_unlock(&readAhead->mutex);
        pthread_mutex_unlock(&queueMutex);
        if (!run) continue;
        // The slot's buffers belong to this thread while it is running.
        int ok = cipher.decryptor && prefetch(readAhead, slot, pgno, &cipher);
        pthread_mutex_lock(&readAhead->mutex);
        slot->state = ok ? SLOT_READY : SLOT_EMPTY;
        pthread_cond_broadcast(&readAhead->changed);
        pthread_mutex_unlock(&readAhead->mutex);
    }
    return NULL;
}

static pthread_once_t workersOnce = PTHREAD_ONCE_INIT;

static void start_workers(void) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int count = cpus > 1 ? (int)(cpus - 1) : 1;
    if (count > 4) count = 4;
    for (int i = 0; i < count; i++) {
        pthread_t thread;
        pthread_attr_t attributes;
        pthread_attr_init(&attributes);
        pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&thread, &attributes, read_ahead_worker, NULL) == 0) workerCount++;
        pthread_attr_destroy(&attributes);
    }
}

void grdbcipher_set_read_ahead(int enabled) {
    __atomic_store_n(&readAheadEnabled, enabled, __ATOMIC_RELAXED);
}

static ReadAhead *read_ahead_new(CipherFile *file) {
    pthread_once(&workersOnce, start_workers);
    if (workerCount == 0) return NULL;
    ReadAhead *readAhead = calloc(1, sizeof(ReadAhead));
    if (!readAhead) return NULL;
    int pageSize = file->codec->pageSize;
    readAhead->memory = malloc((size_t)pageSize * 2 * READAHEAD_WINDOW);
    if (!readAhead->memory) { free(readAhead); return NULL; }
    pthread_mutex_init(&readAhead->mutex, NULL);
    pthread_cond_init(&readAhead->changed, NULL);
    readAhead->file = file;
    readAhead->codec = file->codec;
    readAhead->pageSize = pageSize;
    for (int i = 0; i < READAHEAD_WINDOW; i++) {
        readAhead->slots[i].ciphertext = readAhead->memory + (size_t)pageSize * 2 * i;
        readAhead->slots[i].plaintext = readAhead->slots[i].ciphertext + pageSize;
    }
    return readAhead;
}

/// Cancels the queued jobs of a file, waits for the running ones, and frees
/// the window, wiping its plaintext.
static void read_ahead_free(CipherFile *file) {
    ReadAhead *readAhead = file->readAhead;
    if (!readAhead) return;
    file->readAhead = NULL;
    pthread_mutex_lock(&queueMutex);
    for (unsigned long index = queueHead; index != queueTail; index++) {
        if (queue[index % READAHEAD_QUEUE].readAhead == readAhead) queue[index % READAHEAD_QUEUE].readAhead = NULL;
    }
    pthread_mutex_unlock(&queueMutex);
    pthread_mutex_lock(&readAhead->mutex);
    for (;;) {
        int running = 0;
        for (int i = 0; i < READAHEAD_WINDOW; i++) if (readAhead->slots[i].state == SLOT_RUNNING) running = 1;
        if (!running) break;
        pthread_cond_wait(&readAhead->changed, &readAhead->mutex);
    }
    pthread_mutex_unlock(&readAhead->mutex);
    pthread_mutex_destroy(&readAhead->mutex);
    pthread_cond_destroy(&readAhead->changed);
    OPENSSL_cleanse(readAhead->memory, (size_t)readAhead->pageSize * 2 * READAHEAD_WINDOW);
    free(readAhead->memory);
    free(readAhead);
}

/// Takes page `pgno` from the window into `page`: 1 when it was decrypted
/// ahead and is still what the file holds, 0 otherwise.
///
/// "Still what the file holds" is checked on the page's IV and HMAC: every
/// write of a page draws a fresh random IV, so a page rewritten since it was
/// decrypted (by a checkpoint, or another process) has another IV. Reading
/// those bytes instead of the whole page leaves the reader's core the HMAC
/// and the copy only. SQLite never reads a page while it is being written
/// (its locks see to that), so a page can't be half new, half old.
static int read_ahead_take(CipherFile *file, unsigned int pgno, unsigned char *page) {
    ReadAhead *readAhead = file->readAhead;
    ReadAheadSlot *slot = &readAhead->slots[pgno % READAHEAD_WINDOW];
    int ready = 0;
    pthread_mutex_lock(&readAhead->mutex);
    // A page a worker is still on is decrypted again here rather than
    // waited for: on a busy machine the worker may not run for a while.
    if (slot->pgno == pgno && slot->state != SLOT_RUNNING) {
        ready = slot->state == SLOT_READY;
        // Taken, or still queued (the connection decrypts it now). Workers
        // never touch an empty slot, and only this thread fills slots: its
        // buffers stay as they are after the unlock.
        slot->state = SLOT_EMPTY;
    }
    pthread_mutex_unlock(&readAhead->mutex);
    if (!ready) return 0;
    int pageSize = readAhead->pageSize, reserve = readAhead->codec->reserve;
    unsigned char tag[MAX_RESERVE];
    sqlite3_int64 offset = (sqlite3_int64)(pgno - 1) * pageSize + pageSize - reserve;
    if (file->real->pMethods->xRead(file->real, tag, reserve, offset) != SQLITE_OK) return 0;
    if (memcmp(tag, slot->ciphertext + pageSize - reserve, reserve) != 0) return 0;
    memcpy(page, slot->plaintext, pageSize);
    file->readAheadPages++;
    return 1;
}

/// Records a page read by the connection, and once reads are sequential,
/// queues the pages that follow it.
static void read_ahead_note(CipherFile *file, unsigned int pgno) {
    int sequential = pgno == file->lastReadPgno + 1;
    file->lastReadPgno = pgno;
    file->sequentialReads = sequential ? file->sequentialReads + 1 : 0;
    if (file->sequentialReads < READAHEAD_TRIGGER || file->rekeyCodec || !__atomic_load_n(&readAheadEnabled, __ATOMIC_RELAXED)) return;
    // v4 only: a v3 page (1 KB, HMAC-SHA1, about 1.5 µs) costs less to
    // decrypt than to take from a worker (lock, tag check, copy). Measured:
    // a v3 scan took 122 ms alone, 146-157 ms with read-ahead.
    if (file->codec->version != 4) return;
    if (!file->readAhead && !(file->readAhead = read_ahead_new(file))) return;
    ReadAhead *readAhead = file->readAhead;
    unsigned int through = pgno + READAHEAD_WINDOW - 1;
    unsigned int from = readAhead->scheduledThrough >= pgno + 1 && readAhead->scheduledThrough < through
        ? readAhead->scheduledThrough + 1 : pgno + 1;
    if (readAhead->scheduledThrough >= through && readAhead->scheduledThrough < pgno + READAHEAD_WINDOW * 2) return;
    if (through > readAhead->pageCount) {
        sqlite3_int64 size = 0;
        if (file->real->pMethods->xFileSize(file->real, &size) != SQLITE_OK) return;
        readAhead->pageCount = size / readAhead->pageSize;
        if (through > readAhead->pageCount) through = (unsigned int)readAhead->pageCount;
    }
    int queued[READAHEAD_WINDOW], count = 0;
    pthread_mutex_lock(&readAhead->mutex);
    for (unsigned int next = from; next <= through; next++) {
        int index = next % READAHEAD_WINDOW;
        ReadAheadSlot *slot = &readAhead->slots[index];
        if (slot->state == SLOT_RUNNING) continue;
        if (slot->state != SLOT_EMPTY && slot->pgno == next) continue;
        // Empty, or holding a page the connection went past.
        slot->pgno = next;
        slot->state = SLOT_QUEUED;
        queued[count++] = index;
    }
    pthread_mutex_unlock(&readAhead->mutex);
    readAhead->scheduledThrough = through;
    if (count == 0) return;
    pthread_mutex_lock(&queueMutex);
    for (int i = 0; i < count && queueTail - queueHead < READAHEAD_QUEUE; i++) {
        queue[queueTail % READAHEAD_QUEUE] = (ReadAheadJob){ readAhead, queued[i] };
        queueTail++;
    }
    pthread_cond_signal(&queueNotEmpty);
    pthread_mutex_unlock(&queueMutex);
}

static sqlite3_vfs cipherVFS;
static sqlite3_vfs *baseVFS;

/// The file's scratch buffer, at least `size` bytes: one per file, because
/// a connection never uses its files from two threads at once.
static unsigned char *file_buffer(CipherFile *file, int size) {
    if (file->bufferSize >= size) return file->buffer;
    unsigned char *buffer = sqlite3_malloc(size);
    if (!buffer) return NULL;
    if (file->buffer) {
        OPENSSL_cleanse(file->buffer, file->bufferSize);
        sqlite3_free(file->buffer);
    }
    file->buffer = buffer;
    file->bufferSize = size;
    return buffer;
}

static Codec *file_codec(CipherFile *file) {
    if (file->kind == KIND_MAIN) return file->codec;
    if ((file->kind == KIND_JOURNAL || file->kind == KIND_WAL) && file->mainFile) return file->mainFile->codec;
    return NULL;
}

/// Loads the salt of a main database: from its first 16 bytes, or a fresh
/// random one for an empty file.
static int load_salt(CipherFile *file) {
    Codec *codec = file->codec;
    if (!codec || codec->hasSalt) return SQLITE_OK;
    if (codec->hasExplicitSalt) { codec->hasSalt = 1; return SQLITE_OK; }
    sqlite3_int64 size = 0;
    int rc = file->real->pMethods->xFileSize(file->real, &size);
    if (rc != SQLITE_OK) return rc;
    if (size >= SALT_SIZE) {
        unsigned char header[SALT_SIZE];
        rc = file->real->pMethods->xRead(file->real, header, SALT_SIZE, 0);
        if (rc != SQLITE_OK) return rc;
        if (memcmp(header, SQLITE_MAGIC, SALT_SIZE) == 0) {
            codec->state = GRDBCIPHER_STATE_KEY_ON_PLAINTEXT;
            return SQLITE_NOTADB;
        }
        memcpy(codec->salt, header, SALT_SIZE);
    } else if (RAND_bytes(codec->salt, SALT_SIZE) != 1) {
        return SQLITE_ERROR;
    }
    codec->hasSalt = 1;
    return SQLITE_OK;
}

static int ctr_xor(const unsigned char *key, sqlite3_int64 offset, unsigned char *data, int length) {
    // Counter blocks start at offset / 16; skip into the first block.
    unsigned char iv[IV_SIZE] = { 0 };
    sqlite3_uint64 block = (sqlite3_uint64)offset / 16;
    for (int i = 0; i < 8; i++) iv[15 - i] = (unsigned char)(block >> (8 * i));
    int skip = (int)(offset % 16);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    unsigned char scratch[16];
    int outLength = 0;
    int ok = ctx && EVP_EncryptInit_ex(ctx, EVP_aes_256_ctr(), NULL, key, iv);
    if (ok && skip) ok = EVP_EncryptUpdate(ctx, scratch, &outLength, scratch, skip);
    if (ok) ok = EVP_EncryptUpdate(ctx, data, &outLength, data, length);
    EVP_CIPHER_CTX_free(ctx);
    return ok ? SQLITE_OK : SQLITE_IOERR;
}

static unsigned int read_be32(const unsigned char *p) {
    return ((unsigned int)p[0] << 24) | ((unsigned int)p[1] << 16) | ((unsigned int)p[2] << 8) | p[3];
}

static void write_be32(unsigned char *p, unsigned int value) {
    p[0] = (unsigned char)(value >> 24); p[1] = (unsigned char)(value >> 16);
    p[2] = (unsigned char)(value >> 8); p[3] = (unsigned char)value;
}

// MARK: Checksums of journal records and WAL frames
//
// SQLite checksums what it hands to the VFS: the plaintext. SQLCipher's
// codec sits above SQLite's pager, so it checksums the encrypted pages. For
// hot journals and WAL files to open in both, the checksums on disk are
// those of the ciphertext: translated on the way out, and back on the way
// in, where a checksum that does not match the ciphertext stays wrong.

/// The sum of the bytes a journal record checksum covers (every 200th byte
/// from the end of the page); the checksum adds a nonce from the header.
static unsigned int journal_sample_sum(const unsigned char *page, int pageSize) {
    unsigned int sum = 0;
    for (int i = pageSize - 200; i > 0; i -= 200) sum += page[i];
    return sum;
}

/// Continues a WAL checksum over `data` (a multiple of 8 bytes).
static void wal_checksum(int bigEndian, const unsigned char *data, int length, unsigned int sum[2]) {
    unsigned int s1 = sum[0], s2 = sum[1];
    for (int i = 0; i < length; i += 8) {
        const unsigned char *p = data + i;
        unsigned int x0, x1;
        if (bigEndian) {
            x0 = read_be32(p); x1 = read_be32(p + 4);
        } else {
            x0 = (unsigned int)p[0] | (unsigned int)p[1] << 8 | (unsigned int)p[2] << 16 | (unsigned int)p[3] << 24;
            x1 = (unsigned int)p[4] | (unsigned int)p[5] << 8 | (unsigned int)p[6] << 16 | (unsigned int)p[7] << 24;
        }
        s1 += x0 + s2;
        s2 += x1 + s1;
    }
    sum[0] = s1; sum[1] = s2;
}

/// Whether the WAL's checksums read words big-endian (bit 0 of its magic).
static int wal_big_endian(CipherFile *file) {
    if (!file->walByteOrder) {
        unsigned char magic[4];
        if (file->real->pMethods->xRead(file->real, magic, 4, 0) != SQLITE_OK) return 0;
        file->walByteOrder = (magic[3] & 1) ? 2 : 1;
    }
    return file->walByteOrder == 2;
}

/// The checksum on disk before the frame at `offset`: the WAL header's for
/// the first frame, the previous frame's otherwise.
static int wal_previous_checksum(CipherFile *file, sqlite3_int64 offset, int frameSize, unsigned int sum[2]) {
    unsigned char bytes[8];
    int rc = file->real->pMethods->xRead(file->real, bytes, 8, offset == 32 ? 24 : offset - frameSize + 16);
    if (rc != SQLITE_OK) return rc;
    sum[0] = read_be32(bytes);
    sum[1] = read_be32(bytes + 4);
    return SQLITE_OK;
}

/// The checksum of the frame at `offset` over its encrypted page, chained
/// from the checksum on disk before it, into `out` (8 bytes).
static int wal_cipher_checksum(CipherFile *file, sqlite3_int64 offset, const unsigned char *header, const unsigned char *page, int pageSize, unsigned char *out) {
    unsigned int sum[2];
    int rc = wal_previous_checksum(file, offset, pageSize + 24, sum);
    if (rc != SQLITE_OK) return rc;
    int bigEndian = wal_big_endian(file);
    wal_checksum(bigEndian, header, 8, sum);
    wal_checksum(bigEndian, page, pageSize, sum);
    write_be32(out, sum[0]);
    write_be32(out + 4, sum[1]);
    return SQLITE_OK;
}

/// Writes a frame header that SQLite wrote on its own, not followed by its
/// page: the header of a frame whose page is already on disk (SQLite
/// rewrites them at commit after it rewrote a page of the transaction in
/// place), with the checksum of that page.
static int wal_flush_header(CipherFile *file) {
    if (file->walHeaderOffset < 0) return SQLITE_OK;
    sqlite3_int64 offset = file->walHeaderOffset;
    file->walHeaderOffset = -1;
    Codec *codec = file_codec(file);
    int pageSize = codec->pageSize;
    sqlite3_int64 size = 0;
    int rc = file->real->pMethods->xFileSize(file->real, &size);
    if (rc != SQLITE_OK) return rc;
    if (size >= offset + 24 + pageSize) {
        unsigned char *page = file_buffer(file, pageSize);
        if (!page) return SQLITE_NOMEM;
        rc = file->real->pMethods->xRead(file->real, page, pageSize, offset + 24);
        if (rc == SQLITE_OK) rc = wal_cipher_checksum(file, offset, file->walHeader, page, pageSize, file->walHeader + 16);
        if (rc != SQLITE_OK) return rc;
    }
    return file->real->pMethods->xWrite(file->real, file->walHeader, 24, offset);
}

// MARK: I/O methods

static int cipherClose(sqlite3_file *pFile) {
    CipherFile *file = (CipherFile *)pFile;
    read_ahead_free(file);
    if (file->real->pMethods) wal_flush_header(file);
    int rc = file->real->pMethods ? file->real->pMethods->xClose(file->real) : SQLITE_OK;
    codec_free(file->codec);
    file->codec = NULL;
    OPENSSL_cleanse(file->tempKey, KEY_SIZE);
    if (file->buffer) {
        OPENSSL_cleanse(file->buffer, file->bufferSize);
        sqlite3_free(file->buffer);
        file->buffer = NULL;
    }
    return rc;
}

/// Decrypts a page of a main database. During PRAGMA rekey, pages already
/// rewritten are under the new key, the others under the old one.
static int file_decrypt(CipherFile *file, unsigned int pgno, unsigned char *page) {
    Codec *next = file->rekeyCodec;
    // page_decrypt leaves the page as it is when the HMAC does not match.
    if (next && page_decrypt(next, next->decryptor, pgno, page, page) == SQLITE_OK) return SQLITE_OK;
    return codec_decrypt(file->codec, pgno, page);
}

/// Reads the pages covering [offset, offset+amount) of a main database,
/// decrypts them, and copies the slice asked for. A whole aligned page, what
/// SQLite reads almost always, is decrypted in place in SQLite's buffer.
static int read_main(CipherFile *file, unsigned char *out, int amount, sqlite3_int64 offset) {
    Codec *codec = file->codec;
    int rc = load_salt(file);
    if (rc != SQLITE_OK) return rc;
    int pageSize = codec->pageSize;
    if (amount == pageSize && offset % pageSize == 0) {
        unsigned int pgno = (unsigned int)(offset / pageSize + 1);
        if (file->readAhead && read_ahead_take(file, pgno, out)) {
            read_ahead_note(file, pgno);
            return SQLITE_OK;
        }
        rc = file->real->pMethods->xRead(file->real, out, pageSize, offset);
        // Past the end: a partial or missing page reads as zeros.
        if (rc == SQLITE_IOERR_SHORT_READ) memset(out, 0, pageSize);
        if (rc != SQLITE_OK) return rc;
        rc = file_decrypt(file, pgno, out);
        if (rc != SQLITE_OK) return rc;
        read_ahead_note(file, pgno);
        return SQLITE_OK;
    }
    unsigned char *page = file_buffer(file, pageSize);
    if (!page) return SQLITE_NOMEM;
    sqlite3_int64 first = offset / pageSize, last = (offset + amount - 1) / pageSize;
    int result = SQLITE_OK;
    for (sqlite3_int64 index = first; index <= last; index++) {
        rc = file->real->pMethods->xRead(file->real, page, pageSize, index * pageSize);
        if (rc == SQLITE_IOERR_SHORT_READ) {
            memset(page, 0, pageSize);
            result = SQLITE_IOERR_SHORT_READ;
        } else if (rc != SQLITE_OK) {
            return rc;
        } else {
            rc = file_decrypt(file, (unsigned int)(index + 1), page);
            if (rc != SQLITE_OK) return rc;
        }
        sqlite3_int64 pageStart = index * pageSize;
        sqlite3_int64 from = offset > pageStart ? offset : pageStart;
        sqlite3_int64 to = (offset + amount) < (pageStart + pageSize) ? (offset + amount) : (pageStart + pageSize);
        memcpy(out + (from - offset), page + (from - pageStart), (size_t)(to - from));
    }
    return result;
}

static int write_main(CipherFile *file, const unsigned char *in, int amount, sqlite3_int64 offset) {
    Codec *codec = file->codec;
    int rc = load_salt(file);
    if (rc != SQLITE_OK) return rc;
    int pageSize = codec->pageSize;
    unsigned char *buffer = file_buffer(file, 2 * pageSize);
    if (!buffer) return SQLITE_NOMEM;
    unsigned char *page = buffer, *encrypted = buffer + pageSize;
    sqlite3_int64 first = offset / pageSize, last = (offset + amount - 1) / pageSize;
    for (sqlite3_int64 index = first; index <= last && rc == SQLITE_OK; index++) {
        sqlite3_int64 pageStart = index * pageSize;
        sqlite3_int64 from = offset > pageStart ? offset : pageStart;
        sqlite3_int64 to = (offset + amount) < (pageStart + pageSize) ? (offset + amount) : (pageStart + pageSize);
        const unsigned char *plain = in + (from - offset);
        if (to - from < pageSize) {
            // A partial page write: read, patch, write back. read_main
            // uses the first half of the buffer only for partial reads.
            rc = read_main(file, page, pageSize, pageStart);
            if (rc == SQLITE_IOERR_SHORT_READ) rc = SQLITE_OK;
            if (rc != SQLITE_OK) break;
            memcpy(page + (from - pageStart), in + (from - offset), (size_t)(to - from));
            plain = page;
        }
        // During PRAGMA rekey, pages go out under the new key, except when
        // SQLite rolls the rekey back: the journal holds old-key pages.
        Codec *writer = file->rekeyCodec && !file->playback ? file->rekeyCodec : codec;
        rc = codec_encrypt(writer, (unsigned int)(index + 1), plain, encrypted);
        if (rc == SQLITE_OK) rc = file->real->pMethods->xWrite(file->real, encrypted, pageSize, pageStart);
    }
    return rc;
}

/// Journal records: a 4-byte page number, the page, a 4-byte checksum.
static int read_journal(CipherFile *file, Codec *codec, unsigned char *buffer, int amount, sqlite3_int64 offset) {
    int pageSize = codec->pageSize;
    int rc = file->real->pMethods->xRead(file->real, buffer, amount, offset);
    if (rc != SQLITE_OK) return rc;
    if (amount == 4 && offset == file->recordOffset + 4 + pageSize) {
        // The record's checksum: from ciphertext back to plaintext. A
        // record whose page failed its HMAC ends the journal, as a torn one.
        unsigned int checksum = read_be32(buffer) - file->recordCipherSum + file->recordPlainSum;
        write_be32(buffer, file->recordBad ? checksum + 1 : checksum);
        file->recordOffset = -100;
        return SQLITE_OK;
    }
    // The page is the read right after its page number (headers can be as
    // large as a page, and are not preceded by one).
    if (amount == 4) { file->lastPgno = read_be32(buffer); file->lastPgnoOffset = offset; }
    else if (amount == pageSize && offset == file->lastPgnoOffset + 4) {
        // Forward work only writes the journal: a page read back from it is
        // a rollback, whose pages must go back under the old key.
        if (file->mainFile) file->mainFile->playback = 1;
        file->recordOffset = file->lastPgnoOffset;
        file->recordCipherSum = journal_sample_sum(buffer, pageSize);
        rc = codec_decrypt(codec, file->lastPgno, buffer);
        file->recordBad = rc != SQLITE_OK;
        if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB) {
            sqlite3_log(SQLITE_CORRUPT, "grdbcipher: journal page %u fails its HMAC check: the journal ends there", file->lastPgno);
            rc = SQLITE_OK;
        }
        file->recordPlainSum = journal_sample_sum(buffer, pageSize);
        return rc;
    }
    return SQLITE_OK;
}

/// WAL frames: a 24-byte header (page number, commit size, salts,
/// checksum), then the page.
static int read_wal(CipherFile *file, Codec *codec, unsigned char *buffer, int amount, sqlite3_int64 offset) {
    int pageSize = codec->pageSize, frameSize = pageSize + 24;
    if (amount == frameSize && offset >= 32 && (offset - 32) % frameSize == 0) {
        // Whole frames are read by WAL recovery, in order from the first,
        // which checks their checksum chain over what it gets: plaintext.
        int rc = file->real->pMethods->xRead(file->real, buffer, amount, offset);
        if (rc != SQLITE_OK) return rc;
        unsigned int cipherSum[2], plainSum[2];
        int chained = 1;
        if (offset == 32) {
            rc = wal_previous_checksum(file, offset, frameSize, cipherSum);
            if (rc != SQLITE_OK) return rc;
            plainSum[0] = cipherSum[0]; plainSum[1] = cipherSum[1];
        } else if (file->walChainOffset == offset - frameSize) {
            memcpy(cipherSum, file->walCipherSum, sizeof(cipherSum));
            memcpy(plainSum, file->walPlainSum, sizeof(plainSum));
        } else {
            // Out of order (SQLite rewriting checksums, which it does not
            // check): the header stays as on disk.
            chained = 0;
        }
        int bigEndian = wal_big_endian(file);
        int valid = 0;
        if (chained) {
            wal_checksum(bigEndian, buffer, 8, cipherSum);
            wal_checksum(bigEndian, buffer + 24, pageSize, cipherSum);
            valid = cipherSum[0] == read_be32(buffer + 16) && cipherSum[1] == read_be32(buffer + 20);
        }
        unsigned int pgno = read_be32(buffer);
        // A frame that fails its HMAC is handed over encrypted: its checksum
        // decides whether it belongs to the log, and reading its page later
        // reports the corruption.
        if (pgno != 0 && codec_derive(codec) == SQLITE_OK) {
            page_decrypt(codec, codec->decryptor, pgno, buffer + 24, buffer + 24);
        }
        if (!chained) {
            file->walChainOffset = -1;
            return SQLITE_OK;
        }
        wal_checksum(bigEndian, buffer, 8, plainSum);
        wal_checksum(bigEndian, buffer + 24, pageSize, plainSum);
        write_be32(buffer + 16, valid ? plainSum[0] : plainSum[0] ^ 1);
        write_be32(buffer + 20, plainSum[1]);
        file->walChainOffset = offset;
        memcpy(file->walCipherSum, cipherSum, sizeof(cipherSum));
        memcpy(file->walPlainSum, plainSum, sizeof(plainSum));
        return SQLITE_OK;
    }
    if (amount == pageSize && offset >= 32 + 24) {
        unsigned char header[4];
        int rc = file->real->pMethods->xRead(file->real, header, 4, offset - 24);
        if (rc != SQLITE_OK) return rc;
        rc = file->real->pMethods->xRead(file->real, buffer, amount, offset);
        if (rc != SQLITE_OK) return rc;
        return codec_decrypt(codec, read_be32(header), buffer);
    }
    int rc = file->real->pMethods->xRead(file->real, buffer, amount, offset);
    if (rc == SQLITE_OK && offset == 0 && amount >= 4) file->walByteOrder = (buffer[3] & 1) ? 2 : 1;
    return rc;
}

static int cipherRead(sqlite3_file *pFile, void *buffer, int amount, sqlite3_int64 offset) {
    CipherFile *file = (CipherFile *)pFile;
    Codec *codec = file_codec(file);
    if (file->kind == KIND_TEMP) {
        int rc = file->real->pMethods->xRead(file->real, buffer, amount, offset);
        if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) return rc;
        int xrc = ctr_xor(file->tempKey, offset, buffer, amount);
        if (rc == SQLITE_IOERR_SHORT_READ) {
            // Bytes past the end must read as zeros, not as keystream.
            sqlite3_int64 size = 0;
            file->real->pMethods->xFileSize(file->real, &size);
            if (size < offset + amount) {
                sqlite3_int64 valid = size > offset ? size - offset : 0;
                memset((unsigned char *)buffer + valid, 0, (size_t)(amount - valid));
            }
            return rc;
        }
        return xrc;
    }
    if (!codec) {
        int rc = file->real->pMethods->xRead(file->real, buffer, amount, offset);
        if (file->kind == KIND_MAIN && rc == SQLITE_OK && offset == 0 && amount >= 16
            && memcmp(buffer, SQLITE_MAGIC, 16) != 0) {
            // Not a plain database: an encrypted one opened without a key
            // (SQLite reports "file is not a database").
            unsigned char *bytes = buffer;
            int zero = 1;
            for (int i = 0; i < 16; i++) if (bytes[i]) { zero = 0; break; }
            if (!zero) {
                // Remembered for grdbcipher_state().
                file->sawCiphertext = 1;
            }
        }
        return rc;
    }
    if (file->kind == KIND_MAIN) return read_main(file, buffer, amount, offset);
    if (!codec->hasSalt) {
        // A connection that reads its pages from the WAL: the salt is on
        // page 1 of the database file.
        int rc = load_salt(file->mainFile);
        if (rc != SQLITE_OK) return rc;
    }

    if (file->kind == KIND_JOURNAL) return read_journal(file, codec, buffer, amount, offset);
    int rc = wal_flush_header(file);
    if (rc != SQLITE_OK) return rc;
    return read_wal(file, codec, buffer, amount, offset);
}

static int write_journal(CipherFile *file, Codec *codec, const unsigned char *buffer, int amount, sqlite3_int64 offset) {
    int pageSize = codec->pageSize;
    if (amount == 4 && offset == file->recordOffset + 4 + pageSize) {
        // The record's checksum: from plaintext to ciphertext.
        unsigned char checksum[4];
        write_be32(checksum, read_be32(buffer) - file->recordPlainSum + file->recordCipherSum);
        file->recordOffset = -100;
        return file->real->pMethods->xWrite(file->real, checksum, 4, offset);
    }
    if (amount == 4) { file->lastPgno = read_be32(buffer); file->lastPgnoOffset = offset; }
    if (amount != pageSize || offset != file->lastPgnoOffset + 4) return file->real->pMethods->xWrite(file->real, buffer, amount, offset);
    unsigned char *encrypted = file_buffer(file, pageSize);
    if (!encrypted) return SQLITE_NOMEM;
    int rc = codec_encrypt(codec, file->lastPgno, buffer, encrypted);
    if (rc != SQLITE_OK) return rc;
    file->recordOffset = file->lastPgnoOffset;
    file->recordPlainSum = journal_sample_sum(buffer, pageSize);
    file->recordCipherSum = journal_sample_sum(encrypted, pageSize);
    return file->real->pMethods->xWrite(file->real, encrypted, pageSize, offset);
}

static int write_wal(CipherFile *file, Codec *codec, const unsigned char *buffer, int amount, sqlite3_int64 offset) {
    int pageSize = codec->pageSize, frameSize = pageSize + 24;
    int isHeader = amount == 24 && offset >= 32 && (offset - 32) % frameSize == 0;
    int isPage = amount == pageSize && offset >= 32 + 24 && (offset - 32 - 24) % frameSize == 0;
    int rc;
    if (!(isPage && offset == file->walHeaderOffset + 24)) {
        rc = wal_flush_header(file);
        if (rc != SQLITE_OK) return rc;
    }
    if (offset == 0 && amount >= 4) {
        // A new WAL header: its magic gives the checksums' byte order.
        file->walByteOrder = (buffer[3] & 1) ? 2 : 1;
        file->walChainOffset = -1;
    }
    if (amount == frameSize && offset >= 32 && (offset - 32) % frameSize == 0) {
        unsigned char *frame = file_buffer(file, amount);
        if (!frame) return SQLITE_NOMEM;
        memcpy(frame, buffer, 24);
        rc = codec_encrypt(codec, read_be32(buffer), buffer + 24, frame + 24);
        if (rc == SQLITE_OK) rc = wal_cipher_checksum(file, offset, frame, frame + 24, pageSize, frame + 16);
        if (rc == SQLITE_OK) rc = file->real->pMethods->xWrite(file->real, frame, amount, offset);
        return rc;
    }
    if (isHeader) {
        // SQLite writes a frame as its header, then its page: the header
        // waits for the page, to go out with the checksum of the encrypted
        // page, in one write (a header alone goes out before the next
        // operation on the file).
        memcpy(file->walHeader, buffer, 24);
        file->walHeaderOffset = offset;
        return SQLITE_OK;
    }
    if (!isPage) return file->real->pMethods->xWrite(file->real, buffer, amount, offset);
    unsigned char *frame = file_buffer(file, frameSize);
    if (!frame) return SQLITE_NOMEM;
    if (offset == file->walHeaderOffset + 24) {
        memcpy(frame, file->walHeader, 24);
        file->walHeaderOffset = -1;
    } else {
        // A page of a frame written earlier (SQLite rewrites frames of the
        // open transaction in place): its header is on disk.
        rc = file->real->pMethods->xRead(file->real, frame, 24, offset - 24);
        if (rc != SQLITE_OK) return rc;
    }
    rc = codec_encrypt(codec, read_be32(frame), buffer, frame + 24);
    if (rc == SQLITE_OK) rc = wal_cipher_checksum(file, offset - 24, frame, frame + 24, pageSize, frame + 16);
    if (rc == SQLITE_OK) rc = file->real->pMethods->xWrite(file->real, frame, frameSize, offset - 24);
    return rc;
}

static int cipherWrite(sqlite3_file *pFile, const void *buffer, int amount, sqlite3_int64 offset) {
    CipherFile *file = (CipherFile *)pFile;
    Codec *codec = file_codec(file);
    if (file->kind == KIND_TEMP) {
        unsigned char *copy = file_buffer(file, amount);
        if (!copy) return SQLITE_NOMEM;
        memcpy(copy, buffer, amount);
        int rc = ctr_xor(file->tempKey, offset, copy, amount);
        if (rc == SQLITE_OK) rc = file->real->pMethods->xWrite(file->real, copy, amount, offset);
        return rc;
    }
    if (!codec) return file->real->pMethods->xWrite(file->real, buffer, amount, offset);
    if (file->kind == KIND_MAIN) return write_main(file, buffer, amount, offset);
    if (!codec->hasSalt) {
        int rc = load_salt(file->mainFile);
        if (rc != SQLITE_OK) return rc;
    }

    if (file->kind == KIND_JOURNAL) return write_journal(file, codec, buffer, amount, offset);
    return write_wal(file, codec, buffer, amount, offset);
}

static int cipherTruncate(sqlite3_file *pFile, sqlite3_int64 size) {
    CipherFile *file = (CipherFile *)pFile;
    int rc = wal_flush_header(file);
    if (rc != SQLITE_OK) return rc;
    file->walChainOffset = -1;
    return file->real->pMethods->xTruncate(file->real, size);
}

static int cipherSync(sqlite3_file *pFile, int flags) {
    CipherFile *file = (CipherFile *)pFile;
    // A checksum written after the sync would not be durable with it.
    int rc = wal_flush_header(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xSync(file->real, flags);
}

static int cipherFileSize(sqlite3_file *pFile, sqlite3_int64 *pSize) {
    CipherFile *file = (CipherFile *)pFile;
    int rc = wal_flush_header(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xFileSize(file->real, pSize);
}

static int cipherLock(sqlite3_file *pFile, int lock) {
    CipherFile *file = (CipherFile *)pFile;
    return file->real->pMethods->xLock(file->real, lock);
}

static int cipherUnlock(sqlite3_file *pFile, int lock) {
    CipherFile *file = (CipherFile *)pFile;
    return file->real->pMethods->xUnlock(file->real, lock);
}

static int cipherCheckReservedLock(sqlite3_file *pFile, int *pResOut) {
    CipherFile *file = (CipherFile *)pFile;
    return file->real->pMethods->xCheckReservedLock(file->real, pResOut);
}

/// Sets the key of a main database file.
static int set_file_key(CipherFile *file, const void *key, int nKey, int version, int kdfIterations) {
    if (file->kind != KIND_MAIN) return SQLITE_MISUSE;
    Codec *codec = codec_new(key, nKey, version, kdfIterations);
    if (!codec) return SQLITE_MISUSE;
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

static int cipherFileControl(sqlite3_file *pFile, int op, void *pArg) {
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

static int cipherSectorSize(sqlite3_file *pFile) {
    CipherFile *file = (CipherFile *)pFile;
    return file->real->pMethods->xSectorSize(file->real);
}

static int cipherDeviceCharacteristics(sqlite3_file *pFile) {
    CipherFile *file = (CipherFile *)pFile;
    int flags = file->real->pMethods->xDeviceCharacteristics(file->real);
    // Pages are rewritten whole: never claim atomic or powersafe partial writes.
    return flags & ~(SQLITE_IOCAP_ATOMIC | SQLITE_IOCAP_ATOMIC512 | SQLITE_IOCAP_ATOMIC1K | SQLITE_IOCAP_ATOMIC2K
                     | SQLITE_IOCAP_ATOMIC4K | SQLITE_IOCAP_ATOMIC8K | SQLITE_IOCAP_ATOMIC16K | SQLITE_IOCAP_ATOMIC32K
                     | SQLITE_IOCAP_ATOMIC64K | SQLITE_IOCAP_BATCH_ATOMIC);
}

static int cipherShmMap(sqlite3_file *pFile, int iPg, int pgsz, int bExtend, void volatile **pp) {
    CipherFile *file = (CipherFile *)pFile;
    return file->real->pMethods->xShmMap(file->real, iPg, pgsz, bExtend, pp);
}

static int cipherShmLock(sqlite3_file *pFile, int offset, int n, int flags) {
    CipherFile *file = (CipherFile *)pFile;
    return file->real->pMethods->xShmLock(file->real, offset, n, flags);
}

static void cipherShmBarrier(sqlite3_file *pFile) {
    CipherFile *file = (CipherFile *)pFile;
    file->real->pMethods->xShmBarrier(file->real);
}

static int cipherShmUnmap(sqlite3_file *pFile, int deleteFlag) {
    CipherFile *file = (CipherFile *)pFile;
    return file->real->pMethods->xShmUnmap(file->real, deleteFlag);
}

static int cipherFetch(sqlite3_file *pFile, sqlite3_int64 offset, int amount, void **pp) {
    // No memory-mapped reads: they would bypass decryption.
    *pp = NULL;
    return SQLITE_OK;
}

static int cipherUnfetch(sqlite3_file *pFile, sqlite3_int64 offset, void *p) {
    return SQLITE_OK;
}

static const sqlite3_io_methods cipherMethods = {
    3,
    cipherClose, cipherRead, cipherWrite, cipherTruncate, cipherSync, cipherFileSize,
    cipherLock, cipherUnlock, cipherCheckReservedLock, cipherFileControl, cipherSectorSize,
    cipherDeviceCharacteristics, cipherShmMap, cipherShmLock, cipherShmBarrier, cipherShmUnmap,
    cipherFetch, cipherUnfetch,
};

// MARK: - VFS

static int cipherOpen(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *pFile, int flags, int *pOutFlags) {
    CipherFile *file = (CipherFile *)pFile;
    memset(file, 0, sizeof(CipherFile));
    file->real = (sqlite3_file *)(file + 1);
    file->lastPgnoOffset = -100;
    file->recordOffset = -100;
    file->walHeaderOffset = -1;
    file->walChainOffset = -1;
    if (flags & SQLITE_OPEN_MAIN_DB) file->kind = KIND_MAIN;
    else if (flags & SQLITE_OPEN_MAIN_JOURNAL) file->kind = KIND_JOURNAL;
    else if (flags & SQLITE_OPEN_WAL) file->kind = KIND_WAL;
    else if (flags & (SQLITE_OPEN_TEMP_DB | SQLITE_OPEN_TEMP_JOURNAL | SQLITE_OPEN_SUBJOURNAL | SQLITE_OPEN_TRANSIENT_DB)) file->kind = KIND_TEMP;
    else file->kind = KIND_OTHER;

    int rc = baseVFS->xOpen(baseVFS, name, file->real, flags, pOutFlags);
    if (rc != SQLITE_OK) {
        file->real->pMethods = NULL;
        pFile->pMethods = NULL;
        return rc;
    }
    if (file->kind == KIND_TEMP && RAND_bytes(file->tempKey, KEY_SIZE) != 1) {
        file->real->pMethods->xClose(file->real);
        return SQLITE_IOERR;
    }
    if ((file->kind == KIND_JOURNAL || file->kind == KIND_WAL) && name) {
        sqlite3_file *main = sqlite3_database_file_object(name);
        if (main && main->pMethods == &cipherMethods) file->mainFile = (CipherFile *)main;
    }
    if (file->kind == KIND_MAIN && name) {
        Codec *codec = NULL;
        if (take_pending_key(name, &codec)) file->codec = codec;
    }
    pFile->pMethods = &cipherMethods;
    return SQLITE_OK;
}

static int cipherDelete(sqlite3_vfs *vfs, const char *name, int syncDir) {
    return baseVFS->xDelete(baseVFS, name, syncDir);
}

static int cipherAccess(sqlite3_vfs *vfs, const char *name, int flags, int *pResOut) {
    return baseVFS->xAccess(baseVFS, name, flags, pResOut);
}

static int cipherFullPathname(sqlite3_vfs *vfs, const char *name, int n, char *out) {
    return baseVFS->xFullPathname(baseVFS, name, n, out);
}

static void *cipherDlOpen(sqlite3_vfs *vfs, const char *name) { return baseVFS->xDlOpen(baseVFS, name); }
static void cipherDlError(sqlite3_vfs *vfs, int n, char *out) { baseVFS->xDlError(baseVFS, n, out); }
static void (*cipherDlSym(sqlite3_vfs *vfs, void *p, const char *sym))(void) { return baseVFS->xDlSym(baseVFS, p, sym); }
static void cipherDlClose(sqlite3_vfs *vfs, void *p) { baseVFS->xDlClose(baseVFS, p); }
static int cipherRandomness(sqlite3_vfs *vfs, int n, char *out) { return baseVFS->xRandomness(baseVFS, n, out); }
static int cipherSleep(sqlite3_vfs *vfs, int micro) { return baseVFS->xSleep(baseVFS, micro); }
static int cipherCurrentTime(sqlite3_vfs *vfs, double *out) { return baseVFS->xCurrentTime(baseVFS, out); }
static int cipherGetLastError(sqlite3_vfs *vfs, int n, char *out) { return baseVFS->xGetLastError ? baseVFS->xGetLastError(baseVFS, n, out) : 0; }
static int cipherCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *out) { return baseVFS->xCurrentTimeInt64(baseVFS, out); }
static int cipherSetSystemCall(sqlite3_vfs *vfs, const char *name, sqlite3_syscall_ptr p) { return baseVFS->xSetSystemCall(baseVFS, name, p); }
static sqlite3_syscall_ptr cipherGetSystemCall(sqlite3_vfs *vfs, const char *name) { return baseVFS->xGetSystemCall(baseVFS, name); }
static const char *cipherNextSystemCall(sqlite3_vfs *vfs, const char *name) { return baseVFS->xNextSystemCall(baseVFS, name); }

static pthread_once_t registerOnce = PTHREAD_ONCE_INIT;
static int registerResult = SQLITE_ERROR;

static void register_vfs(void) {
    sqlite3_initialize();
    baseVFS = sqlite3_vfs_find(NULL);
    if (!baseVFS) return;
    cipherVFS.iVersion = 3;
    cipherVFS.szOsFile = (int)sizeof(CipherFile) + baseVFS->szOsFile;
    cipherVFS.mxPathname = baseVFS->mxPathname;
    cipherVFS.zName = "grdbcipher";
    cipherVFS.xOpen = cipherOpen;
    cipherVFS.xDelete = cipherDelete;
    cipherVFS.xAccess = cipherAccess;
    cipherVFS.xFullPathname = cipherFullPathname;
    cipherVFS.xDlOpen = cipherDlOpen;
    cipherVFS.xDlError = cipherDlError;
    cipherVFS.xDlSym = cipherDlSym;
    cipherVFS.xDlClose = cipherDlClose;
    cipherVFS.xRandomness = cipherRandomness;
    cipherVFS.xSleep = cipherSleep;
    cipherVFS.xCurrentTime = cipherCurrentTime;
    cipherVFS.xGetLastError = cipherGetLastError;
    cipherVFS.xCurrentTimeInt64 = cipherCurrentTimeInt64;
    cipherVFS.xSetSystemCall = cipherSetSystemCall;
    cipherVFS.xGetSystemCall = cipherGetSystemCall;
    cipherVFS.xNextSystemCall = cipherNextSystemCall;
    registerResult = sqlite3_vfs_register(&cipherVFS, 1);
}

int grdbcipher_register(void) {
    pthread_once(&registerOnce, register_vfs);
    return registerResult;
}

// MARK: - Connections

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
