import Foundation
import GRDB
import GRDBCipher

// A database file from the input, opened as a daemon opens a tenant: as an
// encrypted database (v4, then v3) and as a plain one. Opening and reading
// either work or throw a typed error; the file is never written.

private let directory: URL = {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("FuzzCipherHeader-\(getpid())")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}()

/// The key of the seed corpus (Fuzz/Corpus/FuzzCipherHeader), with 2 PBKDF2 iterations.
let seedKey = CipherKey.passphrase("fuzz")
let seedIterations = 2

private func read(_ path: String, key: CipherKey?, compatibility: CipherCompatibility) {
    do {
        let queue = try CipherDatabase.queue(atPath: path, key: key, compatibility: compatibility, kdfIterations: key == nil ? nil : seedIterations)
        defer { try? queue.close() }
        try queue.read { db in
            for table in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'") {
                _ = try Row.fetchAll(db, sql: "SELECT * FROM \(table.quotedDatabaseIdentifier) LIMIT 100")
            }
            _ = try String.fetchAll(db, sql: "PRAGMA quick_check")
        }
    } catch is CipherError {
    } catch is DatabaseError {
    } catch {
        fatalError("opening a fuzzed file threw an untyped error: \(error)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let data = Data(bytes: start, count: count)
    let path = directory.appendingPathComponent("db.sqlite").path
    func clean() { for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
    clean()
    defer { clean() }
    do {
        try data.write(to: URL(fileURLWithPath: path))
    } catch {
        fatalError("can't write the input: \(error)")
    }
    read(path, key: seedKey, compatibility: .v4)
    read(path, key: seedKey, compatibility: .v3)
    read(path, key: nil, compatibility: .v4)
    // Reads never write: a damaged file must stay as it was found.
    guard let after = FileManager.default.contents(atPath: path) else { fatalError("the input file disappeared") }
    guard after == data else { fatalError("reading a fuzzed file changed it (\(data.count) -> \(after.count) bytes)") }
    return 0
}
