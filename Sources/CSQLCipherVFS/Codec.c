// The page codec: keys, IVs, and the encryption and HMAC of one page.

#include "Internal.h"

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

HIDDEN void codec_free(Codec *codec) {
    if (!codec) return;
    if (codec->holdsCacheEntry) kdf_cache_release(codec->cacheDigest);
    EVP_CIPHER_CTX_free(codec->encryptor);
    EVP_CIPHER_CTX_free(codec->decryptor);
    secret_free(codec->passphrase, (size_t)codec->passphraseLength);
    secret_free(codec, sizeof(Codec));
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

HIDDEN int parse_hex(const char *hex, int length, unsigned char *out) {
    for (int i = 0; i < length / 2; i++) {
        int high = hex_value(hex[2 * i]), low = hex_value(hex[2 * i + 1]);
        if (high < 0 || low < 0) return 0;
        out[i] = (unsigned char)(high * 16 + low);
    }
    return 1;
}

/// The hex digits of `text` (`length` characters) when it is an SQL blob
/// literal, x'…', or NULL.
HIDDEN const char *blob_literal_digits(const char *text, int length) {
    if (length < 3 || (text[0] != 'x' && text[0] != 'X') || text[1] != '\'' || text[length - 1] != '\'') return NULL;
    return text + 2;
}

static void codec_set_version(Codec *codec, int version, int kdfIterations) {
    codec->version = version;
    // SQLCipher's defaults per version; an explicit cipher_page_size or
    // iteration count survives a change of version, as in SQLCipher.
    if (version == 4) {
        if (!codec->explicitPageSize) codec->pageSize = 4096;
        codec->reserve = 80; codec->hmacSize = 64; codec->md = EVP_sha512();
        if (!codec->explicitIterations) codec->kdfIterations = 256000;
    } else {
        if (!codec->explicitPageSize) codec->pageSize = 1024;
        codec->reserve = 48; codec->hmacSize = 20; codec->md = EVP_sha1();
        if (!codec->explicitIterations) codec->kdfIterations = 64000;
    }
    if (kdfIterations > 0) { codec->kdfIterations = kdfIterations; codec->explicitIterations = 1; }
}

/// A cipher page size: a power of two from 1024 to 65536. SQLCipher also
/// takes 512, but SQLite requires at least 480 usable bytes per page, and
/// the reserve (48 or 80 bytes) leaves less in a 512-byte page: SQLite
/// lays such a database out with 1024-byte pages, and refuses to open one.
/// The rule's owner is Swift's `CipherFileFormat.isValidPageSize(_:)`
/// (GRDBCipher/CipherFileFormat.swift), which the configuration and
/// registryctl ask; this copy stays so that the C layer refuses a bad size
/// on its own (PRAGMA cipher_page_size, pending keys). Change both together.
HIDDEN int valid_page_size(int pageSize) {
    return pageSize >= 1024 && pageSize <= 65536 && (pageSize & (pageSize - 1)) == 0;
}

/// Whether the plaintext header fits the page geometry: the encrypted part
/// of page 1 must be at least one AES block, or encryption would run
/// backwards over the header (a heap overflow); and the header must stop
/// before the auto-vacuum flag (MAX_PLAINTEXT_HEADER).
HIDDEN int codec_geometry_is_valid(const Codec *codec) {
    int encrypted = codec->pageSize - codec->reserve;
    return valid_page_size(codec->pageSize)
        && codec->plaintextHeaderSize >= 0 && codec->plaintextHeaderSize <= MAX_PLAINTEXT_HEADER
        && codec->plaintextHeaderSize % 16 == 0
        && codec->plaintextHeaderSize < encrypted && encrypted % 16 == 0;
}

/// Sets cipher_page_size: SQLITE_OK, or SQLITE_MISUSE for a size SQLCipher
/// does not accept or that leaves no room after the plaintext header.
HIDDEN int codec_set_page_size(Codec *codec, int pageSize) {
    if (!valid_page_size(pageSize) || codec->derived) return SQLITE_MISUSE;
    int previous = codec->pageSize;
    codec->pageSize = pageSize;
    if (!codec_geometry_is_valid(codec)) { codec->pageSize = previous; return SQLITE_MISUSE; }
    codec->explicitPageSize = 1;
    return SQLITE_OK;
}

HIDDEN int page_is_zero(const unsigned char *page, int length) {
    unsigned char any = 0;
    for (int i = 0; i < length; i++) any |= page[i];
    return any == 0;
}

HIDDEN Codec *codec_new(const void *key, int nKey, int version, int kdfIterations) {
    if (!key || nKey <= 0 || (version != 3 && version != 4)) return NULL;
    Codec *codec = secret_alloc(sizeof(Codec));
    if (!codec) return NULL;
    codec_set_version(codec, version, kdfIterations);
    const char *text = key;
    // x'<64 hex>' or x'<64 hex><32 hex>': a raw key (and salt).
    if ((nKey == 67 || nKey == 99) && blob_literal_digits(text, nKey)) {
        if (!parse_hex(text + 2, 64, codec->key)) { codec_free(codec); return NULL; }
        if (nKey == 99) {
            if (!parse_hex(text + 66, 32, codec->salt)) { codec_free(codec); return NULL; }
            // A salt equal to SQLite's magic would start the file like a
            // plain database: detection would then lock its data out
            // (found by FuzzCipherKey). Refused, as an invalid key.
            if (memcmp(codec->salt, SQLITE_MAGIC, SALT_SIZE) == 0) { codec_free(codec); return NULL; }
            codec->hasExplicitSalt = 1;
        }
        codec->hasRawKey = 1;
        return codec;
    }
    codec->passphrase = secret_alloc((size_t)nKey);
    if (!codec->passphrase) { codec_free(codec); return NULL; }
    memcpy(codec->passphrase, key, nKey);
    codec->passphraseLength = nKey;
    return codec;
}

/// The same key (passphrase, or raw key and salt) and settings (explicit
/// iterations, page size, salt, plaintext header) with another format
/// version's parameters, not yet derived. NULL when the settings do not fit
/// the new version's geometry.
HIDDEN Codec *codec_with_version(const Codec *source, int version) {
    Codec *codec = secret_alloc(sizeof(Codec));
    if (!codec) return NULL;
    codec->explicitPageSize = source->explicitPageSize;
    codec->pageSize = source->pageSize;
    codec->explicitIterations = source->explicitIterations;
    codec->kdfIterations = source->kdfIterations;
    codec_set_version(codec, version, 0);
    if (source->passphrase) {
        codec->passphrase = secret_alloc((size_t)source->passphraseLength);
        if (!codec->passphrase) { codec_free(codec); return NULL; }
        memcpy(codec->passphrase, source->passphrase, source->passphraseLength);
        codec->passphraseLength = source->passphraseLength;
    } else {
        memcpy(codec->key, source->key, KEY_SIZE);
        codec->hasRawKey = 1;
    }
    if (source->hasExplicitSalt) {
        memcpy(codec->salt, source->salt, SALT_SIZE);
        codec->hasExplicitSalt = 1;
    }
    codec->plaintextHeaderSize = source->plaintextHeaderSize;
    if (!codec_geometry_is_valid(codec)) { codec_free(codec); return NULL; }
    return codec;
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

/// Where encryption starts in page `pgno`: after the salt or the plaintext
/// header on page 1, at 0 elsewhere.
static int page_offset(const Codec *codec, unsigned int pgno) {
    if (pgno != 1) return 0;
    return codec->plaintextHeaderSize ? codec->plaintextHeaderSize : SALT_SIZE;
}

/// Encrypts one page: [salt or plaintext header on page 1 | ciphertext |
/// IV | HMAC | random].
HIDDEN int codec_encrypt(Codec *codec, unsigned int pgno, const unsigned char *in, unsigned char *out) {
    int rc = codec_derive(codec);
    if (rc != SQLITE_OK) return rc;
    int offset = page_offset(codec, pgno);
    int end = codec->pageSize - codec->reserve;
    // Never reached through the file controls, which validate the geometry:
    // a last guard against encrypting a negative length.
    if (offset >= end) return SQLITE_MISUSE;
    unsigned char *iv = out + end;
    // The IV, and for v3 the padding after the HMAC (v4's HMAC fills the
    // reserve).
    if (codec_random(codec, iv, IV_SIZE) != SQLITE_OK) return SQLITE_ERROR;
    int padding = codec->reserve - IV_SIZE - codec->hmacSize;
    if (padding > 0 && codec_random(codec, iv + IV_SIZE + codec->hmacSize, padding) != SQLITE_OK) return SQLITE_ERROR;
    if (aes_cbc(codec->encryptor, 1, iv, in + offset, end - offset, out + offset) != SQLITE_OK) return SQLITE_ERROR;
    if (page_hmac(codec, out + offset, end - offset + IV_SIZE, pgno, out + end + IV_SIZE) != SQLITE_OK) return SQLITE_ERROR;
    if (pgno == 1) {
        if (codec->plaintextHeaderSize) memcpy(out, in, codec->plaintextHeaderSize);
        else memcpy(out, codec->salt, SALT_SIZE);
    }
    return SQLITE_OK;
}

/// Checks the HMAC of the page `in` and decrypts it into `out` (which may
/// be `in`) with `decryptor`, keyed with the codec's key: SQLITE_OK, or
/// SQLITE_CORRUPT when the HMAC does not match. Reads the codec only, so
/// read-ahead workers can use it.
HIDDEN int page_decrypt(const Codec *codec, EVP_CIPHER_CTX *decryptor, unsigned int pgno, const unsigned char *in, unsigned char *out) {
    int offset = page_offset(codec, pgno);
    int end = codec->pageSize - codec->reserve;
    if (offset >= end) return SQLITE_MISUSE;
    unsigned char expected[SHA512_DIGEST_LENGTH];
    if (page_hmac(codec, in + offset, end - offset + IV_SIZE, pgno, expected) != SQLITE_OK) return SQLITE_ERROR;
    if (CRYPTO_memcmp(expected, in + end + IV_SIZE, codec->hmacSize) != 0) {
        // Anyone can write zeros: an all-zero page is authentic only in an
        // auto-vacuum database, where SQLite leaves pages it has not written
        // yet inside the file (SQLCipher makes the same exception). Reads
        // past the end of the file never get here (read_main).
        if (!codec->autoVacuum || !page_is_zero(in, codec->pageSize)) return SQLITE_CORRUPT;
        if (out != in) memset(out, 0, codec->pageSize);
        return SQLITE_OK;
    }
    if (aes_cbc(decryptor, 0, in + end, in + offset, end - offset, out + offset) != SQLITE_OK) return SQLITE_ERROR;
    if (pgno == 1) {
        if (!codec->plaintextHeaderSize) memcpy(out, SQLITE_MAGIC, SALT_SIZE);
        else if (out != in) memcpy(out, in, codec->plaintextHeaderSize);
    }
    // SQLite hands back what it reads when it writes a page, and WAL
    // checksums cover the whole page: reserved bytes must read the same
    // every time (zeros), not as this write's IV and HMAC.
    memset(out + end, 0, codec->reserve);
    return SQLITE_OK;
}

/// Decrypts one page in place; SQLITE_NOTADB (page 1: a wrong key) or
/// SQLITE_CORRUPT when the HMAC fails.
HIDDEN int codec_decrypt(Codec *codec, unsigned int pgno, unsigned char *page) {
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
