import Foundation
import GRDBDigests

extension SHA256 {
    /// The SHA-256 (lowercase hexadecimal) of the file at `path`, read in
    /// pieces so that a large file is never in memory whole.
    ///
    /// - throws: ``ReplicaStoreError/localFile(path:reason:)`` when the file
    ///   can't be read.
    static func hexDigest(ofFileAt path: String) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw ReplicaStoreError.localFile(path: path, reason: "can't be read: \(String(cString: strerror(errno)))")
        }
        defer { try? handle.close() }
        let hasher = Hasher()
        while true {
            let chunk: Data
            do {
                chunk = try handle.read(upToCount: 1 << 20) ?? Data()
            } catch {
                throw ReplicaStoreError.localFile(path: path, reason: "can't be read: \(error.localizedDescription)")
            }
            if chunk.isEmpty { break }
            chunk.withUnsafeBytes { hasher.update($0) }
        }
        return hasher.finalizeHex()
    }
}
