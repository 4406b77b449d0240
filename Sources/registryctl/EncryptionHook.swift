import GRDBMigrations

/// How registryctl installs the key of an encrypted database.
///
/// This build has no encryption module, so the hook is nil and any key
/// source (`--key-env`, `--key-file`, a `key` in the configuration) is
/// refused with "encryption support not available in this build" before any
/// database is touched. Wiring encryption in means setting this to a closure
/// that applies the key to the GRDB `Configuration` (e.g. in its
/// `prepareDatabase`).
enum EncryptionHook {
    static let keyApplier: DatabaseKeyApplier? = nil
}
