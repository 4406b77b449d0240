// The README's encrypted databases.
// snippet.hide
import Foundation
import GRDB
import GRDBCipher

/// Where keys come from in the README's third line: a secret store.
struct SecretStore: Sendable {
    func key(for path: String) throws -> CipherKey {
        try CipherKey(KeySource.environment("KEY_OF_" + URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent).read())
    }
}
let secrets = SecretStore()
let keyBytes = Data(repeating: 7, count: 32)

// snippet.show
let pool = try CipherDatabase.pool(atPath: "vault.sqlite", key: .passphrase("secret"))   // v4 by default
var configuration = Configuration()
try configuration.encrypt(with: .raw(keyBytes), compatibility: .v3)                     // or through a Configuration
try configuration.encrypt { path in try secrets.key(for: path) }                          // or a key per database, asked at each open
try CipherDatabase.rekey(atPath: "vault.sqlite", from: .passphrase("secret"), to: .passphrase("new"))
