import GRDBCipher
import GRDBRegistryConfiguration

extension RegistryConfiguration.Cipher {
    /// How a backup or a restore opens and checks a database encrypted
    /// with `key` in this format: the one conversion from a configured
    /// `cipher` setting to ``/GRDBBackup/BackupEncryption`` (a SQLCipher 3
    /// file, or another page size, checked as the default SQLCipher 4
    /// would not open).
    ///
    /// ```swift
    /// let encryption = database.cipher.backupEncryption(key: try CipherKey(source.read()))
    /// try backup.add(.database, named: database.name, databaseAt: database.path, encryption: encryption)
    /// ```
    public func backupEncryption(key: CipherKey) -> BackupEncryption {
        BackupEncryption(key: key, compatibility: compatibility, pageSize: pageSize)
    }
}

extension RegistryConfiguration.Database {
    /// The key (read from its source now) and cipher settings of this
    /// database for a backup or a restore; nil when it is plain.
    ///
    /// ```swift
    /// for database in configuration.databases {
    ///     try backup.add(.database, named: database.name, databaseAt: database.path,
    ///                    encryption: try database.backupEncryption())
    /// }
    /// ```
    ///
    /// - throws: ``/GRDBCipher/KeySourceError`` when the key can't be read,
    ///   ``/GRDBCipher/CipherError`` when it is not a valid key.
    public func backupEncryption() throws -> BackupEncryption? {
        try key.map { cipher.backupEncryption(key: try CipherKey($0.read())) }
    }
}
