// The parts of OpenSSL's libcrypto that the Swift modules call: SHA-256
// checksums of migration files (GRDBMigrations) and HKDF for tenant key
// derivation (GRDBCipher). CSQLCipherVFS links the same library.
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
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
