// Journal and WAL checksums on disk, computed over ciphertext as in SQLCipher.

#include "Internal.h"

// SQLite checksums what it hands to the VFS: the plaintext. SQLCipher's
// codec sits above SQLite's pager, so it checksums the encrypted pages. For
// hot journals and WAL files to open in both, the checksums on disk are
// those of the ciphertext: translated on the way out, and back on the way
// in, where a checksum that does not match the ciphertext stays wrong.

/// The sum of the bytes a journal record checksum covers (every 200th byte
/// from the end of the page); the checksum adds a nonce from the header.
HIDDEN unsigned int journal_sample_sum(const unsigned char *page, int pageSize) {
    unsigned int sum = 0;
    for (int i = pageSize - 200; i > 0; i -= 200) sum += page[i];
    return sum;
}

/// Continues a WAL checksum over `data` (a multiple of 8 bytes).
HIDDEN void wal_checksum(int bigEndian, const unsigned char *data, int length, unsigned int sum[2]) {
    unsigned int s1 = sum[0], s2 = sum[1];
    for (int i = 0; i < length; i += 8) {
        const unsigned char *p = data + i;
        unsigned int x0, x1;
        if (bigEndian) {
            x0 = read_be32(p); x1 = read_be32(p + 4);
        } else {
            x0 = (unsigned int)p[0] | (unsigned int)p[1] << 8 | (unsigned int)p[2] << 16 | (unsigned int)p[3] << 24;
            x1 = (unsigned int)p[4] | (unsigned int)p[5] << 8 | (unsigned int)p[6] << 16 | (unsigned int)p[7] << 24;
        }
        s1 += x0 + s2;
        s2 += x1 + s1;
    }
    sum[0] = s1; sum[1] = s2;
}

/// Whether the WAL's checksums read words big-endian (bit 0 of its magic).
HIDDEN int wal_big_endian(CipherFile *file) {
    if (!file->walByteOrder) {
        unsigned char magic[4];
        if (file->real->pMethods->xRead(file->real, magic, 4, 0) != SQLITE_OK) return 0;
        file->walByteOrder = (magic[3] & 1) ? 2 : 1;
    }
    return file->walByteOrder == 2;
}

/// The checksum on disk before the frame at `offset`: the WAL header's for
/// the first frame, the previous frame's otherwise.
HIDDEN int wal_previous_checksum(CipherFile *file, sqlite3_int64 offset, int frameSize, unsigned int sum[2]) {
    unsigned char bytes[8];
    int rc = file->real->pMethods->xRead(file->real, bytes, 8, offset == 32 ? 24 : offset - frameSize + 16);
    if (rc != SQLITE_OK) return rc;
    sum[0] = read_be32(bytes);
    sum[1] = read_be32(bytes + 4);
    return SQLITE_OK;
}

/// The checksum of the frame at `offset` over its encrypted page, chained
/// from the checksum on disk before it, into `out` (8 bytes).
HIDDEN int wal_cipher_checksum(CipherFile *file, sqlite3_int64 offset, const unsigned char *header, const unsigned char *page, int pageSize, unsigned char *out) {
    unsigned int sum[2];
    // Appending right after the frame this handle appended last, in the same
    // WAL generation (a restart changes the salts): its checksum is the one
    // on disk. Frames of a generation are written once, except by their own
    // transaction, whose in-place rewrites reset the cache.
    if (offset != 32 && file->walLastFrameOffset == offset - (pageSize + 24)
        && memcmp(file->walLastFrameSalts, header + 8, 8) == 0) {
        sum[0] = file->walLastFrameSum[0];
        sum[1] = file->walLastFrameSum[1];
    } else {
        int rc = wal_previous_checksum(file, offset, pageSize + 24, sum);
        if (rc != SQLITE_OK) return rc;
    }
    int bigEndian = wal_big_endian(file);
    wal_checksum(bigEndian, header, 8, sum);
    wal_checksum(bigEndian, page, pageSize, sum);
    write_be32(out, sum[0]);
    write_be32(out + 4, sum[1]);
    return SQLITE_OK;
}

/// Writes a frame header that SQLite wrote on its own, not followed by its
/// page: the header of a frame whose page is already on disk (SQLite
/// rewrites them at commit after it rewrote a page of the transaction in
/// place), with the checksum of that page.
HIDDEN int wal_flush_header(CipherFile *file) {
    if (file->walHeaderOffset < 0) return SQLITE_OK;
    file->walLastFrameOffset = -1;
    sqlite3_int64 offset = file->walHeaderOffset;
    file->walHeaderOffset = -1;
    Codec *codec = file_codec(file);
    int pageSize = codec->pageSize;
    sqlite3_int64 size = 0;
    int rc = file->real->pMethods->xFileSize(file->real, &size);
    if (rc != SQLITE_OK) return rc;
    if (size >= offset + 24 + pageSize) {
        unsigned char *page = file_buffer(file, pageSize);
        if (!page) return SQLITE_NOMEM;
        rc = file->real->pMethods->xRead(file->real, page, pageSize, offset + 24);
        if (rc == SQLITE_OK) rc = wal_cipher_checksum(file, offset, file->walHeader, page, pageSize, file->walHeader + 16);
        if (rc != SQLITE_OK) return rc;
    }
    return file->real->pMethods->xWrite(file->real, file->walHeader, 24, offset);
}
