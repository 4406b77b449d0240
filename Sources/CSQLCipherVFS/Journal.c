// Rollback journals of encrypted databases: records whose pages are
// encrypted with the database's codec, headers and super-journal names
// left plain, as in SQLCipher.

#include "Internal.h"

// The journal's magic number, which starts its headers and super-journal
// records (pager.c).
static const unsigned char JOURNAL_MAGIC[8] = { 0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7 };

/// The page number SQLite gives the record of a super-journal name
/// (PAGER_SJ_PGNO: the page of the pending byte, 0x40000000, plus one).
static unsigned int super_journal_pgno(const Codec *codec) {
    return (unsigned int)(0x40000000 / codec->pageSize + 1);
}

/// Journal records: a 4-byte page number, the page, a 4-byte checksum.
HIDDEN int read_journal(CipherFile *file, Codec *codec, unsigned char *buffer, int amount, sqlite3_int64 offset) {
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

HIDDEN int write_journal(CipherFile *file, Codec *codec, const unsigned char *buffer, int amount, sqlite3_int64 offset) {
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
