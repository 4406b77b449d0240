import Foundation

/// Why an encrypted database can't be used.
public enum CipherError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The key does not open this database (or its first page is damaged).
    case wrongKey(path: String)
    /// The database is encrypted, and no key was given.
    case missingKey(path: String)
    /// A key was given, and the database is not encrypted.
    case keyOnPlaintextDatabase(path: String)
    /// A page failed its HMAC check: the file was modified or damaged.
    case corruptPage(path: String, page: Int)
    /// The database has a plaintext header (see ``CipherPlaintextHeader``),
    /// so its salt is not in the file, and none was given.
    case missingSalt(path: String)
    /// The key is not valid.
    case invalidKey(String)
    /// The encryption VFS could not be registered in SQLite.
    case unavailable(code: Int32)
    /// SQLite's page layout does not match the key's format: page 1 says
    /// `foundPageSize`-byte pages with `foundReserve` reserved bytes, where
    /// the format (compatibility and `cipher_page_size`) has
    /// `pageSize` and `reserve`. A `foundReserve` of -1: a journal record,
    /// WAL frame or write of `foundPageSize` bytes was refused. Nothing was
    /// written.
    case pageGeometry(path: String, pageSize: Int, reserve: Int, foundPageSize: Int, foundReserve: Int)
    /// A cipher page size that can't be used: it must be a power of two
    /// from 1024 to 65536 (SQLite requires 480 usable bytes per page, which
    /// a 512-byte page does not keep after IV and HMAC), with room for the
    /// plaintext header.
    case invalidPageSize(Int)
    /// A re-key, encryption or copy did not complete; the original is
    /// unchanged. `reason` never contains a key.
    case operationFailed(path: String, reason: String)
    /// The destination of a copy already exists.
    case destinationExists(path: String)

    public var description: String {
        switch self {
        case let .wrongKey(path):
            return "The key does not open \(path) (wrong key, wrong compatibility, or a damaged first page). The file was not modified."
        case let .missingKey(path):
            return "\(path) is encrypted: open it with its key."
        case let .keyOnPlaintextDatabase(path):
            return "\(path) is not encrypted: open it without a key, or encrypt it first (CipherDatabase.encrypt)."
        case let .corruptPage(path, page):
            return "Page \(page) of \(path) failed its integrity check (HMAC): the file was modified or damaged."
        case let .missingSalt(path):
            return "\(path) has a plaintext header, so its salt is not in the file: give it with CipherPlaintextHeader(size:salt:). The file was not modified."
        case let .invalidKey(reason):
            return "Invalid key: \(reason)."
        case let .unavailable(code):
            return "The encryption VFS could not be registered (SQLite error \(code))."
        case let .pageGeometry(path, pageSize, reserve, foundPageSize, foundReserve):
            if foundReserve < 0 {
                return "\(path): refused to write or read \(foundPageSize) bytes where a whole \(pageSize)-byte page of the key's format goes. Nothing was written."
            }
            return "\(path) has \(foundPageSize)-byte pages with \(foundReserve) reserved bytes, but the key's format has \(pageSize)-byte pages with \(reserve): give the page size it was encrypted with (cipher_page_size), or the right compatibility. The file was not modified."
        case let .invalidPageSize(size):
            return "Invalid cipher page size \(size): \(CipherFileFormat.pageSizeRule), with room for the plaintext header."
        case let .operationFailed(path, reason):
            return "\(path): \(reason). The original file is unchanged."
        case let .destinationExists(path):
            return "\(path) already exists: choose a new path."
        }
    }
}
