// The sqlite3_io_methods of the VFS's files: each method dispatches on the
// kind of file, to the main database (CipherFile.c), its journal
// (Journal.c), its WAL (WAL.c) or a temporary file (TempFiles.c); locks and
// shared memory pass through.

#include "Internal.h"

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

/// The main database file of a connection, when the cipher VFS opened it:
/// a file is the VFS's when its methods are this table (below), so this
/// lives beside the table and nothing under IOMethods.c refers to it.
HIDDEN CipherFile *main_file(sqlite3 *db) {
    sqlite3_file *file = NULL;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK || !file) return NULL;
    if (file->pMethods != &cipherMethods) return NULL;
    return (CipherFile *)file;
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