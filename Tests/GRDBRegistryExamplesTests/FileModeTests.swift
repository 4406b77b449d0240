import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
import Testing

/// Review security-2, L2 and L6: plaintext databases, their WAL and WAL
/// index, and tenant folders are created for their owner only (0600,
/// 0700), whatever the umask, unless the connections' `fileMode` says
/// otherwise. Existing files keep their mode.
@Suite struct FileModeTests {
    static func mode(_ path: String) -> mode_t? {
        var status = stat()
        return lstat(path, &status) == 0 ? status.st_mode & 0o7777 : nil
    }

    @Test func newPlaintextDatabasesAndTheirSidecarsAreForTheirOwnerOnly() throws {
        let directory = try TemporaryDirectory()
        let connections = DatabaseConnections()
        let poolPath = directory.path("players.sqlite")
        let pool = try connections.pool(atPath: poolPath)
        try pool.write { db in try db.execute(sql: "CREATE TABLE t(x); INSERT INTO t VALUES (1)") }
        #expect(Self.mode(poolPath) == 0o600)
        #expect(Self.mode(poolPath + "-wal") == 0o600)
        #expect(Self.mode(poolPath + "-shm") == 0o600)
        let queuePath = directory.path("settings.sqlite")
        let queue = try connections.queue(atPath: queuePath)
        try queue.inDatabase { db in
            try db.execute(sql: "CREATE TABLE t(x)")
            try db.execute(sql: "BEGIN; INSERT INTO t VALUES (1)")
            #expect(Self.mode(queuePath + "-journal") == 0o600)
            try db.execute(sql: "COMMIT")
        }
        #expect(Self.mode(queuePath) == 0o600)
        try connections.close(pool)
        try connections.close(queue)

        // An existing file keeps its mode.
        let existing = directory.path("existing.sqlite")
        let created = try DatabaseQueue(path: existing)
        try created.close()
        #expect(chmod(existing, 0o640) == 0)
        let reopened = try connections.queue(atPath: existing)
        try connections.close(reopened)
        #expect(Self.mode(existing) == 0o640)
    }

    @Test func tenantFoldersAndFilesAreForTheirOwnerOnly() async throws {
        let directory = try TemporaryDirectory()
        let root = directory.url.appendingPathComponent("data/tenants")
        let tenants = try TenantDirectory<PlayerRepository>(root: root, connections: DatabaseConnections())
        #expect(Self.mode(root.path) == 0o700)
        #expect(Self.mode(directory.path("data")) == 0o700)
        let acme = try TenantID("acme")
        try tenants.provision(acme)
        _ = try await tenants.withRepository(acme) { try await $0.add(name: "Arthur") }
        let path = try tenants.path(of: acme)
        #expect(Self.mode(path) == 0o600)
        #expect(Self.mode(path + "-wal") == 0o600)
        #expect(Self.mode(path + "-shm") == 0o600)
        await tenants.close()
    }

    /// Group access is a setting of the connections: files 0660, folders
    /// 0770, even where the umask would remove the group's write bit.
    @Test func groupAccessIsASettingOfTheConnections() async throws {
        let directory = try TemporaryDirectory()
        let connections = DatabaseConnections(fileMode: 0o660)
        #expect(connections.directoryMode == 0o770)
        let root = directory.url.appendingPathComponent("tenants")
        let tenants = try TenantDirectory<PlayerRepository>(root: root, connections: connections)
        #expect(Self.mode(root.path) == 0o770)
        let acme = try TenantID("acme")
        try tenants.provision(acme)
        _ = try await tenants.withRepository(acme) { try await $0.add(name: "Arthur") }
        #expect(Self.mode(try tenants.path(of: acme)) == 0o660)
        await tenants.close()
    }
}
