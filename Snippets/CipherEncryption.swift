// Encrypted databases in the SQLCipher format: open, inspect, re-key.
// snippet.hide
import Foundation
import GRDB
import GRDBCipher

let directory = NSTemporaryDirectory() + "cipher-snippet-\(UUID().uuidString)"
try FileManager.default.createDirectory(
    atPath: directory, withIntermediateDirectories: true)
let path = directory + "/vault.sqlite"
let passphrase = "correct horse battery staple"

// snippet.show
// snippet.open
// A new encrypted file is created with mode 0600, in the SQLCipher 4 format.
let pool = try CipherDatabase.pool(atPath: path, key: .passphrase(passphrase))
try pool.write { db in
    try db.execute(sql: """
        CREATE TABLE secret(id INTEGER PRIMARY KEY, value TEXT NOT NULL)
        """)
}
try pool.close()

// snippet.configuration
// The same, through a GRDB Configuration: every GRDB feature keeps working.
var configuration = Configuration()
try configuration.encrypt(with: .passphrase(passphrase))
let queue = try DatabaseQueue(path: path, configuration: configuration)
try queue.close()

// snippet.errors
// A wrong key is a typed error at open, and the file is left untouched.
do {
    _ = try CipherDatabase.queue(atPath: path, key: .passphrase("wrong"))
} catch let error as CipherError {
    // The key does not open …/vault.sqlite (…). The file was not modified.
    print(error)
}

// snippet.inspect
// What SQLCipher must be told to open the file, and whether every page
// is authentic.
let inspection = try CipherDatabase.inspect(
    atPath: path, key: .passphrase(passphrase))
print(inspection.format)    // compatibility 4, cipher_page_size 4096, …
if let problem = inspection.problem {
    print("damaged: \(problem)")
}

// snippet.rekey
// A checked copy under the new key replaces the file with rename(2):
// a crash leaves the old file, and the old key, valid.
try CipherDatabase.rekey(
    atPath: path,
    from: .passphrase(passphrase),
    to: .passphrase("a longer and newer passphrase"))

// snippet.legacy
// A database that an older application wrote with SQLCipher 3:
let legacy = try CipherDatabase.queue(
    atPath: directory + "/legacy.sqlite",
    key: .passphrase("secret"),
    compatibility: .v3)
try legacy.close()
// snippet.end
