// WAL files of encrypted databases: frame pages encrypted with the
// database's codec, frame headers plain with checksums over ciphertext
// (Checksums.c), as in SQLCipher.

#include "Internal.h"

/// WAL frames: a 24-byte header (page number, commit size, salts,
/// checksum), then the page.
HIDDEN int read_wal(CipherFile *file, Codec *codec, unsigned char *buffer, int amount, sqlite3_int64 offset) {
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

/// Remembers the frame just appended at `offset` (its salts and checksum),
/// or forgets the last one when `appended` is 0.
static void wal_note_append(CipherFile *file, int appended, sqlite3_int64 offset, const unsigned char *frame) {
    if (!appended) { file->walLastFrameOffset = -1; return; }
    file->walLastFrameOffset = offset;
    memcpy(file->walLastFrameSalts, frame + 8, 8);
    file->walLastFrameSum[0] = read_be32(frame + 16);
    file->walLastFrameSum[1] = read_be32(frame + 20);
}

HIDDEN int write_wal(CipherFile *file, Codec *codec, const unsigned char *buffer, int amount, sqlite3_int64 offset) {
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
