// Review security-2, L3 (repro n1): with a plaintext header of 64 bytes,
// bytes 52-55 of SQLite's header (the auto-vacuum flag, which exempts
// all-zero pages from their HMAC check) were outside the authenticated
// part of page 1. Without the key, setting that flag and zeroing a page
// gave a blob read back with zeros, and no error.
//
// Now: a header above 48 bytes is refused, by the pragma and by
// grdbcipher_set_key; and with the largest header left (48), the same
// tampering is detected. Exit status 0, or the number of the failed step.
#include "Internal.h"
#include <fcntl.h>
#include <sys/stat.h>

static int exec(sqlite3 *db, const char *sql) {
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/// Opens `path` with a plaintext header of `header` bytes; 0 when the
/// header was refused (`*db` is then closed and NULL).
static int open_with_header(const char *path, int header, sqlite3 **db) {
    *db = NULL;
    if (sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) return -1;
    char sql[96];
    snprintf(sql, sizeof sql, "PRAGMA cipher_plaintext_header_size = %d", header);
    if (exec(*db, sql) != SQLITE_OK) { sqlite3_close(*db); *db = NULL; return 0; }
    exec(*db, "PRAGMA cipher_salt = \"x'00112233445566778899aabbccddeeff'\"");
    if (grdbcipher_set_key(*db, "secret", 6, 4, 1000) != SQLITE_OK) { sqlite3_close(*db); *db = NULL; return 0; }
    exec(*db, "PRAGMA temp_store = MEMORY");
    return 1;
}

static void remove_database(const char *path) {
    const char *suffixes[] = { "", "-journal", "-wal", "-shm" };
    char name[1024];
    for (int i = 0; i < 4; i++) { snprintf(name, sizeof name, "%s%s", path, suffixes[i]); unlink(name); }
}

/// Writes a 7000-byte blob (overflow pages), then, as an attacker without
/// the key, sets bytes 52-55 to 1 and zeroes the last page. Returns 0 when
/// reading the blob fails (tampering detected), 1 when it reads back.
static int tamper_goes_unnoticed(const char *path, int header) {
    remove_database(path);
    sqlite3 *db;
    if (open_with_header(path, header, &db) != 1) return -1;
    if (exec(db, "CREATE TABLE b(id INTEGER PRIMARY KEY, big BLOB)") != SQLITE_OK) return -1;
    if (exec(db, "INSERT INTO b VALUES(1, replace(hex(zeroblob(7000)), '00', 'BA'))") != SQLITE_OK) return -1;
    sqlite3_close(db);
    struct stat status;
    if (stat(path, &status) != 0) return -1;
    int pages = (int)(status.st_size / 4096);
    int fd = open(path, O_RDWR);
    unsigned char one[4] = { 0, 0, 0, 1 };
    unsigned char zero[4096] = { 0 };
    if (pwrite(fd, one, 4, 52) != 4 || pwrite(fd, zero, 4096, (off_t)(pages - 1) * 4096) != 4096) { close(fd); return -1; }
    close(fd);
    if (open_with_header(path, header, &db) != 1) return -1;
    sqlite3_stmt *statement = NULL;
    int unnoticed = 0;
    if (sqlite3_prepare_v2(db, "SELECT length(big) FROM b", -1, &statement, NULL) == SQLITE_OK
        && sqlite3_step(statement) == SQLITE_ROW) unnoticed = 1;
    sqlite3_finalize(statement);
    if (!unnoticed && grdbcipher_state(db) == GRDBCIPHER_STATE_OK) unnoticed = 1;   // failed, but not as tampering
    sqlite3_close(db);
    return unnoticed;
}

int main(int argc, char **argv) {
    if (argc < 2 || grdbcipher_register() != SQLITE_OK) return 100;
    const char *path = argv[1];
    sqlite3 *db;
    // 1. The review's 64-byte header is refused, as is any header above 48.
    for (int header = 64; header <= 992; header += 16) {
        remove_database(path);
        if (open_with_header(path, header, &db) != 0) {
            fprintf(stderr, "a %d-byte plaintext header was accepted\n", header);
            if (header == 64 && db) {
                sqlite3_close(db);
                if (tamper_goes_unnoticed(path, 64) == 1) fprintf(stderr, "and a zeroed page read back as authentic (n1)\n");
            } else if (db) sqlite3_close(db);
            return 1;
        }
    }
    // 2. grdbcipher_set_key refuses it too, whatever the order.
    remove_database(path);
    if (sqlite3_open(path, &db) != SQLITE_OK) return 2;
    if (grdbcipher_set_key(db, "secret", 6, 4, 1000) != SQLITE_OK) return 2;
    if (exec(db, "PRAGMA cipher_plaintext_header_size = 64") == SQLITE_OK) return 3;
    sqlite3_close(db);
    // 3. With the largest header left, the n1 tampering is detected.
    int result = tamper_goes_unnoticed(path, 48);
    if (result < 0) return 4;
    if (result == 1) { fprintf(stderr, "48-byte header: a zeroed page read back as authentic\n"); return 5; }
    // 4. And with the recommended 32.
    result = tamper_goes_unnoticed(path, 32);
    if (result < 0) return 6;
    if (result == 1) return 7;
    remove_database(path);
    return 0;
}
