import CSQLCipherVFS
import GRDB

extension Configuration {
    /// Readies every connection of this configuration for a database file
    /// that did not come from this process (a backup, a replica, an
    /// import, a file to verify): SQLite's defensive mode
    /// (`SQLITE_DBCONFIG_DEFENSIVE`) and `trusted_schema=OFF`, before the
    /// file is read. A crafted schema can then neither call functions with
    /// side effects from its views, triggers, indexes or CHECK
    /// constraints, nor write the schema table.
    ///
    /// ```swift
    /// var configuration = Configuration()
    /// configuration.readonly = true
    /// configuration.distrustSchema()
    /// let queue = try DatabaseQueue(path: "incoming/acme.sqlite", configuration: configuration)
    /// ```
    ///
    /// `GRDBBackup`'s restores, `LitestreamRestore`,
    /// ``CipherDatabase/inspect(atPath:key:compatibility:kdfIterations:pageSize:)``
    /// and `registryctl verify` open files this way; restores also refuse
    /// schema objects that their migration set does not create.
    public mutating func distrustSchema() {
        prepareDatabase { db in
            let rc = grdbcipher_distrust_schema(db.sqliteConnection)
            guard rc == SQLITE_OK else {
                throw DatabaseError(resultCode: ResultCode(rawValue: rc), message: "can't turn on SQLite's defensive mode and trusted_schema=OFF")
            }
        }
    }
}
