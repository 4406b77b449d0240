// The sqlite3_io_methods of encrypted files: page encryption on the way
// out, decryption and HMAC checks on the way in.

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
static int verify_key(CipherFile *file) {
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

/// Applies a truncation held back by cipherTruncate, once the key is known
/// to be the file's.
HIDDEN void apply_pending_truncate(CipherFile *file) {
    if (file->pendingTruncate < 0) return;
    sqlite3_int64 size = file->pendingTruncate;
    file->pendingTruncate = -1;
    file->real->pMethods->xTruncate(file->real, size);
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
static int refuse_shape(CipherFile *file, Codec *codec, const char *what, int amount, sqlite3_int64 offset, int writing) {
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
static int write_main(CipherFile *file, const unsigned char *in, int amount, sqlite3_int64 offset) {
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

// The journal's magic number, which starts its headers and super-journal
// records (pager.c).
static const unsigned char JOURNAL_MAGIC[8] = { 0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7 };

/// The page number SQLite gives the record of a super-journal name
/// (PAGER_SJ_PGNO: the page of the pending byte, 0x40000000, plus one).
static unsigned int super_journal_pgno(const Codec *codec) {
    return (unsigned int)(0x40000000 / codec->pageSize + 1);
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
    if (amount == 4) { file->lastPgno = read_be32(buffer); file->lastPgnoOffset = offset; return SQLITE_OK; }
    if (offset != file->lastPgnoOffset + 4 || amount == 8 || file->lastPgno == 0 || file->lastPgno == super_journal_pgno(codec)) {
        // Headers, the magic after a super-journal name, and that name.
        return SQLITE_OK;
    }
    if (amount != pageSize) return refuse_shape(file, codec, "a journal record", amount, offset, 0);
    // Forward work only writes the journal: a page read back from it is
    // a rollback, whose pages must go back under the old key.
    if (file->mainFile) file->mainFile->playback = 1;
    file->recordOffset = file->lastPgnoOffset;
    file->recordCipherSum = journal_sample_sum(buffer, pageSize);
    rc = codec_decrypt(codec, file->lastPgno, buffer);
    file->recordBad = rc != SQLITE_OK;
    if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB) {
        if (!file->journalVerified) {
            // The first record already fails: the key is not the journal's
            // (a wrong key, or the new key after a rekey killed half-way).
            // Playing back nothing would delete a hot journal and leave a
            // torn transaction: SQLite stops here, the journal and the
            // database untouched.
            codec->state = GRDBCIPHER_STATE_WRONG_KEY;
            codec->failedPage = (int)file->lastPgno;
            return SQLITE_NOTADB;
        }
        sqlite3_log(SQLITE_CORRUPT, "grdbcipher: journal page %u fails its HMAC check: the journal ends there", file->lastPgno);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_OK) {
        file->journalVerified = 1;
        if (file->mainFile && !codec->keyVerified) {
            codec->keyVerified = 1;
            apply_pending_truncate(file->mainFile);
        }
    }
    file->recordPlainSum = journal_sample_sum(buffer, pageSize);
    return rc;
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
    // Otherwise only the WAL header or fields of a frame header (SQLite
    // reads the previous frame's checksum): metadata, never page bytes.
    int inFrameHeader = offset >= 32 && (offset - 32) % frameSize + amount <= 24;
    if (!(offset + amount <= 32) && !inFrameHeader) return refuse_shape(file, codec, "the WAL", amount, offset, 0);
    int rc = file->real->pMethods->xRead(file->real, buffer, amount, offset);
    if (rc == SQLITE_OK && offset == 0 && amount >= 4) file->walByteOrder = (buffer[3] & 1) ? 2 : 1;
    return rc;
}

/// A database that an encrypted connection opens besides its main one
/// (ATTACH, the target of VACUUM INTO) without a key of its own takes the
/// connection's key, as in SQLCipher: never plaintext by accident. A
/// pending "no key" entry (CipherDatabase.exportPlaintext) opts out.
HIDDEN int inherit_key(CipherFile *file) {
    if (file->kind != KIND_MAIN || file->codec || file->explicitlyPlain || file->inheritChecked || !file->db) return SQLITE_OK;
    file->inheritChecked = 1;
    CipherFile *main = main_file(file->db);
    if (!main || main == file || !main->codec) return SQLITE_OK;
    Codec *codec = codec_with_version(main->codec, main->codec->version);
    if (!codec) { file->inheritChecked = 0; return SQLITE_NOMEM; }
    file->codec = codec;
    return SQLITE_OK;
}

static int cipherRead(sqlite3_file *pFile, void *buffer, int amount, sqlite3_int64 offset) {
    CipherFile *file = (CipherFile *)pFile;
    int inherited = inherit_key(file);
    if (inherited != SQLITE_OK) return inherited;
    Codec *codec = file_codec(file);
    if (file->kind == KIND_TEMP) return temp_read(file, buffer, amount, offset);
    if (!codec) {
        int rc = file->real->pMethods->xRead(file->real, buffer, amount, offset);
        if (file->kind == KIND_MAIN && (rc == SQLITE_OK || rc == SQLITE_IOERR_SHORT_READ) && offset == 0 && amount >= 16
            && memcmp(buffer, SQLITE_MAGIC, 16) != 0) {
            unsigned char *bytes = buffer;
            // Not SQLite's header, so no page size. SQLite reads the first
            // 100 bytes of a file when it opens it (sqlite3BtreeOpen),
            // before a key can be set, and a valid page size at offset 16
            // becomes the file's until page 1 is read: the key's PRAGMA
            // page_size can't change it. In an encrypted file those two
            // bytes are ciphertext, and 8 values in 65,536 read as a page
            // size; with 512, 1024 or 2048, SQLite read page 1 from the WAL
            // in pieces that the codec refuses (the fault matrix's
            // intermittent failure). Zeroed, they leave SQLite the page
            // size the key sets (apply_geometry).
            if (amount >= 18) bytes[16] = bytes[17] = 0;
            int zero = 1;
            for (int i = 0; i < 16; i++) if (bytes[i]) { zero = 0; break; }
            if (rc == SQLITE_OK && !zero) {
                // Not a plain database: an encrypted one opened without a
                // key (SQLite reports "file is not a database"). Remembered
                // for grdbcipher_state().
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
    if (amount <= 4) return file->real->pMethods->xWrite(file->real, buffer, amount, offset);
    if (offset == file->lastPgnoOffset + 4) {
        // Where a record's page goes: a codec page, or a super-journal
        // name (a file name) or the magic that ends it; nothing else.
        int superJournal = file->lastPgno == super_journal_pgno(codec)
            || (amount == 8 && memcmp(buffer, JOURNAL_MAGIC, 8) == 0);
        if (amount != pageSize && !superJournal) return refuse_shape(file, codec, "a journal record", amount, offset, 1);
        if (superJournal) return file->real->pMethods->xWrite(file->real, buffer, amount, offset);
    } else {
        // A header (magic or zeros, then the record count, nonce, database
        // size, sector size and page size), or its first fields. A header
        // for pages of another size would be followed by records that
        // aren't codec pages: refused first.
        int magic = memcmp(buffer, JOURNAL_MAGIC, amount < 8 ? amount : 8) == 0;
        int zeros = page_is_zero(buffer, amount < 8 ? amount : 8);
        if (!magic && !zeros) return refuse_shape(file, codec, "the journal", amount, offset, 1);
        if (amount >= 28 && read_be32(buffer + 24) != (unsigned int)pageSize && !page_is_zero(buffer, amount)) {
            return refuse_shape(file, codec, "a journal header", (int)read_be32(buffer + 24), offset, 1);
        }
        return file->real->pMethods->xWrite(file->real, buffer, amount, offset);
    }
    unsigned char *encrypted = file_buffer(file, pageSize);
    if (!encrypted) return SQLITE_NOMEM;
    int rc = codec_encrypt(codec, file->lastPgno, buffer, encrypted);
    if (rc != SQLITE_OK) return rc;
    file->recordOffset = file->lastPgnoOffset;
    file->recordPlainSum = journal_sample_sum(buffer, pageSize);
    file->recordCipherSum = journal_sample_sum(encrypted, pageSize);
    return file->real->pMethods->xWrite(file->real, encrypted, pageSize, offset);
}

/// Remembers the frame just appended at `offset` (its salts and checksum),
/// or forgets the last one when `appended` is 0.
static void wal_note_append(CipherFile *file, int appended, sqlite3_int64 offset, const unsigned char *frame) {
    if (!appended) { file->walLastFrameOffset = -1; return; }
    file->walLastFrameOffset = offset;
    memcpy(file->walLastFrameSalts, frame + 8, 8);
    file->walLastFrameSum[0] = read_be32(frame + 16);
    file->walLastFrameSum[1] = read_be32(frame + 20);
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
        file->walLastFrameOffset = -1;
    }
    if (amount == frameSize && offset >= 32 && (offset - 32) % frameSize == 0) {
        unsigned char *frame = file_buffer(file, amount);
        if (!frame) return SQLITE_NOMEM;
        memcpy(frame, buffer, 24);
        rc = codec_encrypt(codec, read_be32(buffer), buffer + 24, frame + 24);
        if (rc == SQLITE_OK) rc = wal_cipher_checksum(file, offset, frame, frame + 24, pageSize, frame + 16);
        if (rc == SQLITE_OK) rc = file->real->pMethods->xWrite(file->real, frame, amount, offset);
        wal_note_append(file, rc == SQLITE_OK, offset, frame);
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
    if (!isPage) {
        // The WAL header, whose page size must be the codec's; nothing else
        // goes to a WAL but frames, headers and pages.
        if (offset == 0 && amount == 32 && read_be32(buffer + 8) == (unsigned int)pageSize) {
            return file->real->pMethods->xWrite(file->real, buffer, amount, offset);
        }
        return refuse_shape(file, codec, "the WAL", offset == 0 && amount == 32 ? (int)read_be32(buffer + 8) : amount, offset, 1);
    }
    unsigned char *frame = file_buffer(file, frameSize);
    if (!frame) return SQLITE_NOMEM;
    int append = offset == file->walHeaderOffset + 24;
    if (append) {
        memcpy(frame, file->walHeader, 24);
        file->walHeaderOffset = -1;
    } else {
        // A page of a frame written earlier (SQLite rewrites frames of the
        // open transaction in place): its header is on disk, and the
        // checksums after it change.
        file->walLastFrameOffset = -1;
        rc = file->real->pMethods->xRead(file->real, frame, 24, offset - 24);
        if (rc != SQLITE_OK) return rc;
    }
    rc = codec_encrypt(codec, read_be32(frame), buffer, frame + 24);
    if (rc == SQLITE_OK) rc = wal_cipher_checksum(file, offset - 24, frame, frame + 24, pageSize, frame + 16);
    if (rc == SQLITE_OK) rc = file->real->pMethods->xWrite(file->real, frame, frameSize, offset - 24);
    wal_note_append(file, append && rc == SQLITE_OK, offset - 24, frame);
    return rc;
}

static int cipherWrite(sqlite3_file *pFile, const void *buffer, int amount, sqlite3_int64 offset) {
    CipherFile *file = (CipherFile *)pFile;
    int inherited = inherit_key(file);
    if (inherited != SQLITE_OK) return inherited;
    Codec *codec = file_codec(file);
    if (file->kind == KIND_TEMP) return temp_write(file, buffer, amount, offset);
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
    if (file->kind == KIND_TEMP) return temp_truncate(file, size);
    file->walLastFrameOffset = -1;
    if (file->kind == KIND_MAIN && file->codec && !file->codec->keyVerified && verify_key(file) != SQLITE_OK) {
        // Journal playback truncates the database before it reads the first
        // record: held until a record (or page 1) proves the key, so that a
        // wrong key changes nothing.
        file->pendingTruncate = size;
        return SQLITE_OK;
    }
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
    if (file->kind == KIND_TEMP) { *pSize = file->tempSize; return SQLITE_OK; }
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
static int cipherSectorSize(sqlite3_file *pFile) {
    CipherFile *file = (CipherFile *)pFile;
    return file->real->pMethods->xSectorSize(file->real);
}

static int cipherDeviceCharacteristics(sqlite3_file *pFile) {
    CipherFile *file = (CipherFile *)pFile;
    int flags = file->real->pMethods->xDeviceCharacteristics(file->real);
    // Pages are rewritten whole: never claim atomic writes. Powersafe
    // overwrite is passed on: without it SQLite pads WAL commits to a
    // sector boundary by splitting frames across writes, which the WAL
    // encryption refuses (it takes whole frames, headers and pages).
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

HIDDEN const sqlite3_io_methods cipherMethods = {
    3,
    cipherClose, cipherRead, cipherWrite, cipherTruncate, cipherSync, cipherFileSize,
    cipherLock, cipherUnlock, cipherCheckReservedLock, cipherFileControl, cipherSectorSize,
    cipherDeviceCharacteristics, cipherShmMap, cipherShmLock, cipherShmBarrier, cipherShmUnmap,
    cipherFetch, cipherUnfetch,
};
