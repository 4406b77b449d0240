import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations

// A key file, as registryctl and the service read one: its bytes become a
// passphrase or an x'…' raw key (and salt) literal. A key is refused with
// a typed error, or it creates an encrypted database that reopens with the
// same key and refuses a different one. Nothing else passes.

private let directory: URL = {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("FuzzCipherKey-\(getpid())")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}()

private func check(_ key: CipherKey, path: String) {
    for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    defer { for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
    do {
        let queue = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: 1)
        try queue.write { db in try db.execute(sql: "CREATE TABLE t(a); INSERT INTO t VALUES ('fuzz')") }
        try queue.close()
    } catch is CipherError {
        return
    } catch let error as DatabaseError where error.resultCode == .SQLITE_ERROR || error.resultCode == .SQLITE_MISUSE {
        // A key the cipher VFS refuses when SQLite first reads the file.
        return
    } catch {
        fatalError("creating with a key threw an untyped error: \(error)")
    }
    // Accepted: the same key reads the database back, and the file is encrypted.
    do {
        guard CipherDatabase.isEncrypted(atPath: path) == true else { fatalError("a keyed database is not encrypted") }
        let queue = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: 1)
        let value = try queue.read { try String.fetchOne($0, sql: "SELECT a FROM t") }
        try queue.close()
        guard value == "fuzz" else { fatalError("the key does not read back what it wrote") }
    } catch {
        fatalError("a key that created a database can't reopen it: \(error)")
    }
    // Another key is refused, with a typed error.
    do {
        let queue = try CipherDatabase.queue(atPath: path, key: .passphrase("another key"), kdfIterations: 1)
        _ = try queue.read { try String.fetchOne($0, sql: "SELECT a FROM t") }
        fatalError("a different key opened the database")
    } catch is CipherError {
    } catch let error as DatabaseError where error.resultCode == .SQLITE_NOTADB {
    } catch {
        fatalError("a wrong key threw an unexpected error: \(error)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let data = Data(bytes: start, count: count)
    let keyFile = directory.appendingPathComponent("key")
    do {
        try data.write(to: keyFile)
        // Key files open to others are refused before they are read.
        chmod(keyFile.path, 0o600)
    } catch {
        fatalError("can't write the key file: \(error)")
    }
    let secret: DatabaseSecret
    do {
        secret = try KeySource.file(keyFile.path).read()
    } catch is KeySourceError {
        return 0
    } catch {
        fatalError("KeySource.read threw an untyped error: \(error)")
    }
    let database = directory.appendingPathComponent("db.sqlite").path
    // As the daemon and registryctl read a key file: a passphrase or x'…',
    // binary keys refused.
    do {
        check(try CipherKey(secret), path: database)
    } catch is CipherError {
    } catch {
        fatalError("CipherKey(secret) threw an untyped error: \(error)")
    }
    // As a raw key (and salt), when the length allows.
    if count >= 32 {
        let salt: Data? = count >= 48 ? data.subdata(in: 32..<48) : nil
        do {
            check(try CipherKey.raw(data.prefix(32), salt: salt), path: database)
        } catch is CipherError {
        } catch {
            fatalError("CipherKey.raw threw an untyped error: \(error)")
        }
    }
    return 0
}
