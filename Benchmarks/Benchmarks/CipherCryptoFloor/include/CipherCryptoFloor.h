#ifndef CIPHER_CRYPTO_FLOOR_H
#define CIPHER_CRYPTO_FLOOR_H

/// The cryptography an SQLCipher v4 implementation can't avoid, alone:
/// `count` pages of `pageSize` bytes (reserve 80) encrypted with
/// AES-256-CBC and authenticated with HMAC-SHA512 over ciphertext, IV and
/// page number (`decrypt` 0), or verified and decrypted (`decrypt` 1). It
/// uses OpenSSL as the VFS does at its fastest (contexts keyed once, HMAC
/// from precomputed pad states), with no I/O and no IV generation, over
/// `count` distinct pages in memory (as a scan reads them, not one page hot
/// in the CPU cache; not thread-safe: benchmarks run one at a time): the
/// floor against which the VFS's own cost is measured. Returns a checksum
/// of the output (to keep the work), or -1 on an OpenSSL error.
long crypto_floor_pages(int count, int pageSize, int decrypt);

#endif
