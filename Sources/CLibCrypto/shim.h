// The parts of OpenSSL's libcrypto that the Swift modules call: SHA-256
// checksums of migration files (GRDBMigrations) and HMAC-SHA256 for tenant
// key derivation (GRDBCipher). CSQLCipherVFS links the same library.
#include <openssl/evp.h>
#include <openssl/hmac.h>
