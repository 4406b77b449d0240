import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations

/// How registryctl opens encrypted databases: the key read from
/// `--key-env`, `--key-file` or a configuration `key` source is a
/// passphrase (or a raw key written `x'<hex>'`), in the SQLCipher v4 format
/// unless `REGISTRYCTL_CIPHER_COMPATIBILITY=3`. The key never comes from a
/// command-line argument, and is never printed.
enum EncryptionHook {
    static let keyApplier: DatabaseKeyApplier? = { key, configuration in
        let compatibility: CipherCompatibility =
            ProcessInfo.processInfo.environment["REGISTRYCTL_CIPHER_COMPATIBILITY"] == "3" ? .v3 : .v4
        try configuration.encrypt(with: .passphrase(String(decoding: key, as: UTF8.self)), compatibility: compatibility)
    }
}
