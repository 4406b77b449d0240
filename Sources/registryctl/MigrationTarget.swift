import Foundation
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration

/// One database a ``MigrationBatch`` works on.
///
/// ```swift
/// let acme = try TenantID("acme")
/// let target = MigrationTarget(name: acme.rawValue, path: storage.path(of: acme), set: playersSet,
///                              encryption: .tenant(acme, storage))
/// ```
struct MigrationTarget: Sendable {
    /// How the target's key is found.
    enum Encryption: Sendable {
        /// A plain database. An encrypted file is refused with
        /// `TenantEncryptionError.encryptedWithoutKey`, which says so.
        case plain
        /// A named database, the source of its key and its SQLCipher format.
        case key(KeySource, cipher: RegistryConfiguration.Cipher = RegistryConfiguration.Cipher())
        /// A tenant, whose key its storage gives.
        case tenant(TenantID, TenantStorage)
    }

    /// A display name: the configured name, or the tenant id.
    var name: String
    /// The database file.
    var path: String
    /// The migrations it should have.
    var set: MigrationSet
    /// How its key is found.
    var encryption: Encryption
    /// How long its connections wait for another process's lock.
    var busyTimeout: Duration

    init(
        name: String, path: String, set: MigrationSet, encryption: Encryption = .plain,
        busyTimeout: Duration = RegistryConfiguration.defaultBusyTimeout
    ) {
        self.name = name
        self.path = path
        self.set = set
        self.encryption = encryption
        self.busyTimeout = busyTimeout
    }

    /// The SQLCipher format of the target's file: tenants and databases
    /// without one are SQLCipher 4.
    var cipher: RegistryConfiguration.Cipher {
        if case .key(_, let cipher) = encryption { return cipher }
        return RegistryConfiguration.Cipher()
    }

    /// The key of the target, or nil when it is plain.
    ///
    /// - throws: `KeySourceError`, `CipherError.invalidKey`,
    ///   `TenantEncryptionError` (`encryptedWithoutKey` for a file that is
    ///   not plain and has no key).
    func key(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> CipherKey? {
        switch encryption {
        case .plain:
            if CipherDatabase.isEncrypted(atPath: path) == true { throw TenantEncryptionError.encryptedWithoutKey(path: path) }
            return nil
        case .key(let source, _):
            return try CipherKey(source.read(environment: environment))
        case .tenant(let id, let storage):
            return try storage.key(for: id)
        }
    }
}

/// The result of one target of a batch: a value, or the message of the error
/// that stopped this target only.
///
/// ```swift
/// for outcome in batch.migrate(dryRun: false) where !outcome.succeeded {
///     print(outcome.name, outcome.result)
/// }
/// ```
struct TargetOutcome<Value: Sendable>: Sendable {
    /// The target's display name.
    var name: String
    /// The target's database file.
    var path: String
    /// What the operation returned, or why it failed.
    var result: Result<Value, TargetFailure>

    /// True when the target succeeded.
    var succeeded: Bool {
        if case .success = result { return true }
        return false
    }
}

/// Why one target of a batch failed.
///
/// ```swift
/// if case .failure(let failure) = outcome.result { print(failure.message) }
/// ```
struct TargetFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The error, described for a human.
    var message: String
    /// The error itself, when it is a ``MigrationError``.
    var migrationError: MigrationError?

    var description: String { message }
}
