// Review finding 7: cipher_plaintext_header_size was checked against one
// page geometry and used with another (a version or page size change),
// and encryption ran over a negative length: a heap overflow that
// AddressSanitizer reports. Every sequence must now be refused or work,
// with no memory error. Exit status 0, or the number of the failed step.
#include "Internal.h"

static int exec(sqlite3 *db, const char *sql) {
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

static int run(const char *path, const char *key, const char *change) {
    unlink(path);
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) return 1;
    char sql[256];
    snprintf(sql, sizeof sql, "PRAGMA key = \"%s\"", key);
    if (exec(db, sql) != SQLITE_OK) return 2;
    // A header that could not fit is refused outright now (at most 48
    // bytes, review security-2 L3). The largest one left fits every
    // geometry: the change goes through, with no memory error.
    if (exec(db, "PRAGMA cipher_plaintext_header_size = 2000") == SQLITE_OK) return 3;
    if (exec(db, "PRAGMA cipher_plaintext_header_size = 48") != SQLITE_OK) return 3;
    if (exec(db, change) != SQLITE_OK) return 4;
    sqlite3_close(db);
    // A 48-byte header works end to end.
    unlink(path);
    if (sqlite3_open(path, &db) != SQLITE_OK) return 5;
    if (exec(db, "PRAGMA cipher_plaintext_header_size = 48") != SQLITE_OK) return 5;
    if (exec(db, "PRAGMA cipher_salt = \"x'00112233445566778899aabbccddeeff'\"") != SQLITE_OK) return 5;
    if (exec(db, sql) != SQLITE_OK) return 5;
    if (exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (randomblob(3000))") != SQLITE_OK) return 6;
    if (exec(db, "SELECT * FROM t") != SQLITE_OK) return 7;
    sqlite3_close(db);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || grdbcipher_register() != SQLITE_OK) return 100;
    const char *path = argv[1];
    const char *keys[] = { "x'0102030405060708091011121314151617181920212223242526272829303132'", "passphrase" };
    const char *changes[] = { "PRAGMA cipher_compatibility = 3", "PRAGMA cipher_page_size = 1024" };
    for (int k = 0; k < 2; k++) {
        for (int c = 0; c < 2; c++) {
            int rc = run(path, keys[k], changes[c]);
            if (rc) { fprintf(stderr, "key %d, change %d: step %d\n", k, c, rc); return 10 * (2 * k + c + 1) + rc; }
        }
    }
    return 0;
}
