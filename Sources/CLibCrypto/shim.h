// The parts of OpenSSL's libcrypto that the Swift modules call: SHA-256
// checksums of migration files (GRDBMigrations), SHA-256 and HMAC-SHA256
// for signing S3 requests (GRDBReplicaStore's SigV4Signer), HKDF for tenant key
// derivation and AES-256-GCM for sealing tenants' changes (GRDBCipher).
// CSQLCipherVFS links the same library.
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

// HKDF-SHA256 (RFC 5869) by OpenSSL 3's EVP_KDF "HKDF": 1 when `output`
// holds the `outputLength` derived bytes, 0 on any error (OpenSSL's error
// queue says which). In C because OSSL_PARAM arrays point into their
// buffers, which Swift can't keep alive across the calls; an empty salt or
// info is left out, as RFC 5869 allows (an absent salt is HashLen zeros).
static inline int grdb_hkdf_sha256(const unsigned char *key, size_t keyLength,
                                   const unsigned char *salt, size_t saltLength,
                                   const unsigned char *info, size_t infoLength,
                                   unsigned char *output, size_t outputLength) {
    if (key == NULL || keyLength == 0 || output == NULL || outputLength == 0) return 0;
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, OSSL_KDF_NAME_HKDF, NULL);
    if (kdf == NULL) return 0;
    EVP_KDF_CTX *context = EVP_KDF_CTX_new(kdf);
    EVP_KDF_free(kdf);
    if (context == NULL) return 0;
    OSSL_PARAM params[5];
    size_t count = 0;
    // The casts drop const only: OpenSSL reads these buffers, never writes them.
    params[count++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0);
    params[count++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)key, keyLength);
    if (salt != NULL && saltLength > 0) {
        params[count++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, saltLength);
    }
    if (info != NULL && infoLength > 0) {
        params[count++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, infoLength);
    }
    params[count] = OSSL_PARAM_construct_end();
    int result = EVP_KDF_derive(context, output, outputLength, params);
    EVP_KDF_CTX_free(context);
    return result == 1;
}

// AES-256-GCM, for sealing an encrypted tenant's changes (GRDBCipher's
// ChangeSealingKey): a 32-byte key, a 12-byte nonce, a 16-byte tag; the
// ciphertext has the plaintext's length. In C, like HKDF above, so that the
// EVP context is freed on every path. Lengths above INT_MAX are refused
// (EVP counts in int). `RAND_bytes` (from <openssl/rand.h>) makes nonces.
#include <limits.h>
#include <openssl/rand.h>

// 1 when `ciphertext` and `tag` are written, 0 on any error (OpenSSL's
// error queue may say which). An empty plaintext may come as NULL.
static inline int grdb_aes256gcm_seal(const unsigned char *key, const unsigned char *nonce,
                                      const unsigned char *aad, size_t aadLength,
                                      const unsigned char *plaintext, size_t plaintextLength,
                                      unsigned char *ciphertext, unsigned char *tag) {
    if (key == NULL || nonce == NULL || tag == NULL) return 0;
    if (aadLength > INT_MAX || plaintextLength > INT_MAX) return 0;
    if (aadLength > 0 && aad == NULL) return 0;
    if (plaintextLength > 0 && (plaintext == NULL || ciphertext == NULL)) return 0;
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    if (context == NULL) return 0;
    int ok = EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1
        && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) == 1
        && EVP_EncryptInit_ex(context, NULL, NULL, key, nonce) == 1;
    int length = 0;
    if (ok && aadLength > 0) {
        ok = EVP_EncryptUpdate(context, NULL, &length, aad, (int)aadLength) == 1;
    }
    if (ok && plaintextLength > 0) {
        ok = EVP_EncryptUpdate(context, ciphertext, &length, plaintext, (int)plaintextLength) == 1
            && (size_t)length == plaintextLength;
    }
    // GCM is a stream mode: Final writes no bytes, only computes the tag.
    unsigned char final[16];
    ok = ok && EVP_EncryptFinal_ex(context, final, &length) == 1 && length == 0
        && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, tag) == 1;
    EVP_CIPHER_CTX_free(context);
    return ok;
}

// 1 when the tag authenticates nonce, associated data and ciphertext under
// `key` and `plaintext` holds the plaintext; 0 when it does not (then
// `plaintext` must be thrown away); -1 on any other error (OpenSSL's error
// queue may say which). An empty ciphertext may come as NULL.
static inline int grdb_aes256gcm_open(const unsigned char *key, const unsigned char *nonce,
                                      const unsigned char *aad, size_t aadLength,
                                      const unsigned char *ciphertext, size_t ciphertextLength,
                                      const unsigned char *tag, unsigned char *plaintext) {
    if (key == NULL || nonce == NULL || tag == NULL) return -1;
    if (aadLength > INT_MAX || ciphertextLength > INT_MAX) return -1;
    if (aadLength > 0 && aad == NULL) return -1;
    if (ciphertextLength > 0 && (ciphertext == NULL || plaintext == NULL)) return -1;
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    if (context == NULL) return -1;
    int ok = EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1
        && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) == 1
        && EVP_DecryptInit_ex(context, NULL, NULL, key, nonce) == 1;
    int length = 0;
    if (ok && aadLength > 0) {
        ok = EVP_DecryptUpdate(context, NULL, &length, aad, (int)aadLength) == 1;
    }
    if (ok && ciphertextLength > 0) {
        ok = EVP_DecryptUpdate(context, plaintext, &length, ciphertext, (int)ciphertextLength) == 1
            && (size_t)length == ciphertextLength;
    }
    // The cast drops const only: OpenSSL copies the expected tag.
    ok = ok && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, (void *)tag) == 1;
    if (!ok) {
        EVP_CIPHER_CTX_free(context);
        return -1;
    }
    unsigned char final[16];
    int authentic = EVP_DecryptFinal_ex(context, final, &length) == 1 && length == 0;
    EVP_CIPHER_CTX_free(context);
    return authentic ? 1 : 0;
}
