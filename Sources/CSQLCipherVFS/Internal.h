// Declarations shared by the files of the VFS; not part of the module's
// public header.

#ifndef CSQLCIPHERVFS_INTERNAL_H
#define CSQLCIPHERVFS_INTERNAL_H

// An SQLite VFS that reads and writes databases in the SQLCipher file format.
//
// Main database pages, rollback journal pages and WAL frame pages of a keyed
// database are encrypted with the SQLCipher page codec (AES-256-CBC, HMAC,
// PBKDF2 key derivation; v3 and v4 parameters). Journal and WAL headers stay
// plain, as in SQLCipher. Temporary files (sorter spills, temp databases,
// statement journals) are encrypted with AES-256-GCM, an ephemeral random
// key and a fresh nonce per block write (TempFiles.c), so that no
// plaintext reaches the disk.

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
/// The largest plaintext header: SQLite's header fields from byte 48 on
/// (52-55: the auto-vacuum flag, which exempts all-zero pages from their
/// HMAC check) must come from the authenticated part of page 1, never from
/// bytes anyone can write (review security-2, L3). SQLCipher recommends 32.
#define MAX_PLAINTEXT_HEADER 48

static const unsigned char SQLITE_MAGIC[16] = "SQLite format 3";

// Shared between the files of this target only: never exported.
#define HIDDEN __attribute__((visibility("hidden")))

// MARK: - Codec

typedef struct Codec {
    int version;                 // 3 or 4
    int pageSize;                // cipher_page_size: 1024 (v3) or 4096 (v4) unless set
    int reserve;                 // 48 (v3) or 80 (v4)
    int hmacSize;                // 20 (v3) or 64 (v4)
    int kdfIterations;
    int explicitIterations;      // kdfIterations given, not the version's default
    int explicitPageSize;        // pageSize given (PRAGMA cipher_page_size)
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
    // The key came from, or went into, the cache of derived keys under
    // this digest: the entry lives while a codec holds it (review
    // security-2, L4), and codec_free releases it.
    int holdsCacheEntry;
    unsigned char cacheDigest[32];
    // SQLCipher 4's plaintext header option: page 1's first bytes (a
    // multiple of 16) stay as SQLite wrote them, and the salt, no longer in
    // the file, must be given (hasExplicitSalt). 0: the salt is there.
    int plaintextHeaderSize;
    int failedPage;              // last page whose HMAC check failed
    int state;                   // GRDBCIPHER_STATE_*
    // Page 1 as found in the file when its geometry does not match the
    // codec's (GRDBCIPHER_STATE_GEOMETRY): what SQLite's header says.
    int foundPageSize, foundReserve;
    // Page 1 says auto-vacuum is on: all-zero pages inside the file are
    // pages SQLite has not written yet (as SQLCipher allows since 4.5.1).
    int autoVacuum;
    // A page of the file or of its journal passed its HMAC check: the key
    // is the file's, and may change it (journal playback truncates first).
    int keyVerified;
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
    int requestedHeaderSize;            // main databases: PRAGMA cipher_plaintext_header_size
    int requestedPageSize;              // main databases: PRAGMA cipher_page_size, 0 if none
    int copyPageSize;                   // main databases: the page size a VACUUM INTO target may take
    int explicitlyPlain;                // main databases: a pending "no key" entry opened it
    int inheritChecked;                 // main databases: looked for the connection's key once
    int journalVerified;                // journals: a record passed its HMAC check
    sqlite3_int64 pendingTruncate;      // main databases: a truncation held until the key is verified, or -1
    int hasRequestedSalt;               // main databases: PRAGMA cipher_salt, for the next key
    unsigned char requestedSalt[SALT_SIZE];
    unsigned char *buffer;              // scratch for pages and frames, wiped on close
    int bufferSize;
    unsigned char tempKey[KEY_SIZE];    // temporary files: ephemeral AES-GCM key
    sqlite3_int64 tempSize;             // temporary files: logical size
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
    // WAL: the last frame this handle appended (offset, salts, checksum on
    // disk), so that the next append chains from memory instead of reading
    // it back. -1 after anything but an append.
    sqlite3_int64 walLastFrameOffset;
    unsigned char walLastFrameSalts[8];
    unsigned int walLastFrameSum[2];
} CipherFile;

static inline unsigned int read_be32(const unsigned char *p) {
    return ((unsigned int)p[0] << 24) | ((unsigned int)p[1] << 16) | ((unsigned int)p[2] << 8) | p[3];
}

static inline void write_be32(unsigned char *p, unsigned int value) {
    p[0] = (unsigned char)(value >> 24); p[1] = (unsigned char)(value >> 16);
    p[2] = (unsigned char)(value >> 8); p[3] = (unsigned char)value;
}

// What crosses files, one section per file, in layer order: a file uses
// only what the sections above its own declare, so no two files call each
// other (GRDBCipherTests' VFSLayeringTests checks it). VFS.c and
// Connections.c, the public C API (CSQLCipherVFS.h), come last and declare
// nothing here.

// Secrets.c
HIDDEN void *secret_alloc(size_t size);
HIDDEN void secret_free(void *memory, size_t size);

// KeyDerivation.c
HIDDEN int codec_derive(Codec *codec);
HIDDEN void kdf_cache_release(const unsigned char digest[32]);

// Codec.c
HIDDEN int parse_hex(const char *hex, int length, unsigned char *out);
HIDDEN const char *blob_literal_digits(const char *text, int length);
HIDDEN Codec *codec_new(const void *key, int nKey, int version, int kdfIterations);
HIDDEN Codec *codec_with_version(const Codec *source, int version);
HIDDEN int codec_set_page_size(Codec *codec, int pageSize);
HIDDEN int codec_geometry_is_valid(const Codec *codec);
HIDDEN int valid_page_size(int pageSize);
HIDDEN int page_is_zero(const unsigned char *page, int length);
HIDDEN void codec_free(Codec *codec);
HIDDEN int codec_encrypt(Codec *codec, unsigned int pgno, const unsigned char *in, unsigned char *out);
HIDDEN int page_decrypt(const Codec *codec, EVP_CIPHER_CTX *decryptor, unsigned int pgno, const unsigned char *in, unsigned char *out);
HIDDEN int codec_decrypt(Codec *codec, unsigned int pgno, unsigned char *page);

// PendingKeys.c
HIDDEN int take_pending_key(const char *path, Codec **codec);
HIDDEN char *canonical_path(const char *path);

// ReadAhead.c
HIDDEN void read_ahead_note(CipherFile *file, unsigned int pgno);
HIDDEN int read_ahead_take(CipherFile *file, unsigned int pgno, unsigned char *page);
HIDDEN void read_ahead_free(CipherFile *file);

// CipherFile.c
HIDDEN unsigned char *file_buffer(CipherFile *file, int size);
HIDDEN Codec *file_codec(CipherFile *file);
HIDDEN int load_salt(CipherFile *file);
HIDDEN void apply_pending_truncate(CipherFile *file);
HIDDEN int verify_key(CipherFile *file);
HIDDEN int refuse_shape(CipherFile *file, Codec *codec, const char *what, int amount, sqlite3_int64 offset, int writing);
HIDDEN int read_main(CipherFile *file, unsigned char *out, int amount, sqlite3_int64 offset);
HIDDEN int write_main(CipherFile *file, const unsigned char *in, int amount, sqlite3_int64 offset);

// Checksums.c
HIDDEN unsigned int journal_sample_sum(const unsigned char *page, int pageSize);
HIDDEN void wal_checksum(int bigEndian, const unsigned char *data, int length, unsigned int sum[2]);
HIDDEN int wal_big_endian(CipherFile *file);
HIDDEN int wal_previous_checksum(CipherFile *file, sqlite3_int64 offset, int frameSize, unsigned int sum[2]);
HIDDEN int wal_cipher_checksum(CipherFile *file, sqlite3_int64 offset, const unsigned char *header, const unsigned char *page, int pageSize, unsigned char *out);
HIDDEN int wal_flush_header(CipherFile *file);

// TempFiles.c
HIDDEN int temp_read(CipherFile *file, unsigned char *out, int amount, sqlite3_int64 offset);
HIDDEN int temp_write(CipherFile *file, const unsigned char *in, int amount, sqlite3_int64 offset);
HIDDEN int temp_truncate(CipherFile *file, sqlite3_int64 size);

// Journal.c
HIDDEN int read_journal(CipherFile *file, Codec *codec, unsigned char *buffer, int amount, sqlite3_int64 offset);
HIDDEN int write_journal(CipherFile *file, Codec *codec, const unsigned char *buffer, int amount, sqlite3_int64 offset);

// WAL.c
HIDDEN int read_wal(CipherFile *file, Codec *codec, unsigned char *buffer, int amount, sqlite3_int64 offset);
HIDDEN int write_wal(CipherFile *file, Codec *codec, const unsigned char *buffer, int amount, sqlite3_int64 offset);

// FileControl.c
HIDDEN int set_file_key(CipherFile *file, const void *key, int nKey, int version, int kdfIterations);
HIDDEN int file_rekey(CipherFile *file, const void *key, int nKey, char **message);
HIDDEN void reserve_for_new_database(CipherFile *file);
HIDDEN int cipherFileControl(sqlite3_file *pFile, int op, void *pArg);

// IOMethods.c
HIDDEN extern const sqlite3_io_methods cipherMethods;
HIDDEN CipherFile *main_file(sqlite3 *db);
HIDDEN int inherit_key(CipherFile *file);

#endif
