// A main database file of the VFS: its buffer, salt and key checks, and
// the encryption of its pages (whole pages only, in the key's geometry).
// The journal (Journal.c) and the WAL (WAL.c) of a database reach its codec
// through here; the method table (IOMethods.c) dispatches to all three, and
// nothing here refers back to it.

#include "Internal.h"

/// The file's scratch buffer, at least `size` bytes: one per file, because
/// a connection never uses its files from two threads at once.
HIDDEN unsigned char *file_buffer(CipherFile *file, int size) {
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

HIDDEN Codec *file_codec(CipherFile *file) {
    if (file->kind == KIND_MAIN) return file->codec;
    if ((file->kind == KIND_JOURNAL || file->kind == KIND_WAL) && file->mainFile) return file->mainFile->codec;
    return NULL;
}

/// Loads the salt of a main database: from its first 16 bytes, or a fresh
/// random one for an empty file.
HIDDEN int load_salt(CipherFile *file) {
    Codec *codec = file->codec;
    if (!codec || codec->hasSalt) return SQLITE_OK;
    if (codec->hasExplicitSalt) { codec->hasSalt = 1; return SQLITE_OK; }
    sqlite3_int64 size = 0;
    int rc = file->real->pMethods->xFileSize(file->real, &size);
    if (rc != SQLITE_OK) return rc;
    if (codec->plaintextHeaderSize && size > 0) {
        // The file starts with SQLite's header: its salt is elsewhere.
        codec->state = GRDBCIPHER_STATE_MISSING_SALT;
        return SQLITE_NOTADB;
    }
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

/// Applies a truncation held back by cipherTruncate, once the key is known
/// to be the file's.
HIDDEN void apply_pending_truncate(CipherFile *file) {
    if (file->pendingTruncate < 0) return;
    sqlite3_int64 size = file->pendingTruncate;
    file->pendingTruncate = -1;
    file->real->pMethods->xTruncate(file->real, size);
}

/// Decrypts a page of a main database. During PRAGMA rekey, pages already
/// rewritten are under the new key, the others under the old one.
static int file_decrypt(CipherFile *file, unsigned int pgno, unsigned char *page) {
    Codec *next = file->rekeyCodec;
    // page_decrypt leaves the page as it is when the HMAC does not match.
    if (next && page_decrypt(next, next->decryptor, pgno, page, page) == SQLITE_OK) return SQLITE_OK;
    int rc = codec_decrypt(file->codec, pgno, page);
    if (rc == SQLITE_OK && !file->codec->keyVerified) {
        file->codec->keyVerified = 1;
        apply_pending_truncate(file);
    }
    return rc;
}

/// Checks the key against page 1 of the file, before a change that does
/// not read first (journal playback truncates, and may extend the file
/// with a zero page): SQLITE_OK when page 1 passes its HMAC check or the
/// file has no page yet, SQLITE_NOTADB otherwise.
HIDDEN int verify_key(CipherFile *file) {
    Codec *codec = file->codec;
    if (codec->keyVerified) return SQLITE_OK;
    int rc = load_salt(file);
    if (rc == SQLITE_OK) rc = codec_derive(codec);
    if (rc != SQLITE_OK) return rc;
    sqlite3_int64 size = 0;
    rc = file->real->pMethods->xFileSize(file->real, &size);
    if (rc != SQLITE_OK) return rc;
    if (size < codec->pageSize) { codec->keyVerified = 1; return SQLITE_OK; }
    unsigned char *page = sqlite3_malloc(codec->pageSize);
    if (!page) return SQLITE_NOMEM;
    rc = file->real->pMethods->xRead(file->real, page, codec->pageSize, 0);
    if (rc == SQLITE_OK) rc = page_decrypt(codec, codec->decryptor, 1, page, page) == SQLITE_OK ? SQLITE_OK : SQLITE_NOTADB;
    OPENSSL_cleanse(page, codec->pageSize);
    sqlite3_free(page);
    if (rc == SQLITE_OK) codec->keyVerified = 1;
    else if (rc == SQLITE_NOTADB) codec->state = GRDBCIPHER_STATE_WRONG_KEY;
    return rc;
}

/// SQLite's page size as page 1's header gives it (1 means 65536).
static int header_page_size(const unsigned char *page) {
    int size = (page[16] << 8) | page[17];
    return size == 1 ? 65536 : size;
}

/// Refuses a page 1 whose header does not describe the codec's pages:
/// SQLite would read and write pages of another size than the codec's, or
/// keep row bytes where the codec puts IV and HMAC. With a plaintext
/// header these fields are outside the HMAC, so this is the only check.
static int check_geometry(CipherFile *file, const unsigned char *page, int writing) {
    Codec *codec = file->codec;
    int pageSize = header_page_size(page), reserve = page[20];
    if (pageSize == codec->pageSize && reserve == codec->reserve) {
        codec->autoVacuum = read_be32(page + 52) != 0;
        return SQLITE_OK;
    }
    codec->foundPageSize = pageSize;
    codec->foundReserve = reserve;
    codec->state = GRDBCIPHER_STATE_GEOMETRY;
    sqlite3_log(SQLITE_NOTADB, "grdbcipher: %s page 1 with %d-byte pages and %d reserved bytes, where the key's format has %d-byte pages and %d reserved bytes (set cipher_page_size)",
                writing ? "refused to write" : "refused to read", pageSize, reserve, codec->pageSize, codec->reserve);
    return writing ? SQLITE_IOERR_WRITE : SQLITE_NOTADB;
}

/// Fails a write or read that is not whole pages of the codec's size where
/// page data goes: passing it through would put plaintext on disk.
HIDDEN int refuse_shape(CipherFile *file, Codec *codec, const char *what, int amount, sqlite3_int64 offset, int writing) {
    codec->foundPageSize = amount;
    codec->foundReserve = -1;
    codec->state = GRDBCIPHER_STATE_GEOMETRY;
    sqlite3_log(writing ? SQLITE_IOERR_WRITE : SQLITE_IOERR_READ,
                "grdbcipher: refused %s %d bytes of %s at offset %lld: not a whole %d-byte page of the key's format",
                writing ? "to write" : "to read", amount, what, (long long)offset, codec->pageSize);
    return writing ? SQLITE_IOERR_WRITE : SQLITE_IOERR_READ;
}

/// Reads the pages covering [offset, offset+amount) of a main database,
/// decrypts them, and copies the slice asked for. A whole aligned page, what
/// SQLite reads almost always, is decrypted in place in SQLite's buffer.
HIDDEN int read_main(CipherFile *file, unsigned char *out, int amount, sqlite3_int64 offset) {
    Codec *codec = file->codec;
    int rc = load_salt(file);
    if (rc != SQLITE_OK) return rc;
    int pageSize = codec->pageSize;
    if (amount == pageSize && offset % pageSize == 0) {
        unsigned int pgno = (unsigned int)(offset / pageSize + 1);
        if (file->readAhead && read_ahead_take(file, pgno, out)) {
            read_ahead_note(file, pgno);
            return pgno == 1 ? check_geometry(file, out, 0) : SQLITE_OK;
        }
        rc = file->real->pMethods->xRead(file->real, out, pageSize, offset);
        // Past the end: a partial or missing page reads as zeros.
        if (rc == SQLITE_IOERR_SHORT_READ) memset(out, 0, pageSize);
        if (rc != SQLITE_OK) return rc;
        rc = file_decrypt(file, pgno, out);
        if (rc == SQLITE_OK && pgno == 1) rc = check_geometry(file, out, 0);
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
            if (rc == SQLITE_OK && index == 0) rc = check_geometry(file, page, 0);
            if (rc != SQLITE_OK) return rc;
        }
        sqlite3_int64 pageStart = index * pageSize;
        sqlite3_int64 from = offset > pageStart ? offset : pageStart;
        sqlite3_int64 to = (offset + amount) < (pageStart + pageSize) ? (offset + amount) : (pageStart + pageSize);
        memcpy(out + (from - offset), page + (from - pageStart), (size_t)(to - from));
    }
    return result;
}

/// Writes whole pages only: SQLite writes its pages whole, and a page of
/// SQLite's that is not a codec page means the geometry is wrong (the
/// codec's reserve would overwrite row bytes, or pages would be split).
HIDDEN int write_main(CipherFile *file, const unsigned char *in, int amount, sqlite3_int64 offset) {
    Codec *codec = file->codec;
    int rc = load_salt(file);
    if (rc != SQLITE_OK) return rc;
    int pageSize = codec->pageSize;
    if (amount != pageSize || offset % pageSize != 0) return refuse_shape(file, codec, "the database", amount, offset, 1);
    // Only a verified key writes: SQLite writes pages it has read, except
    // when a journal playback extends a file it truncated.
    if (!codec->keyVerified && (rc = verify_key(file)) != SQLITE_OK) return rc;
    if (offset == 0 && (rc = check_geometry(file, in, 1)) != SQLITE_OK) return rc;
    unsigned char *encrypted = file_buffer(file, pageSize);
    if (!encrypted) return SQLITE_NOMEM;
    // During PRAGMA rekey, pages go out under the new key, except when
    // SQLite rolls the rekey back: the journal holds old-key pages.
    Codec *writer = file->rekeyCodec && !file->playback ? file->rekeyCodec : codec;
    rc = codec_encrypt(writer, (unsigned int)(offset / pageSize + 1), in, encrypted);
    if (rc == SQLITE_OK) rc = file->real->pMethods->xWrite(file->real, encrypted, pageSize, offset);
    return rc;
}
