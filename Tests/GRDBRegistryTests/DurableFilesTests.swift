import Foundation
import GRDB
@testable import GRDBRegistry
import Testing

/// `DurableFiles`, the one publish of a database file (provisioning,
/// backups, restores), and `TenantDirectory.provision`, which uses it.
@Suite struct DurableFilesTests {
    private func write(_ text: String, to path: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    private func read(_ path: String) throws -> String {
        String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
    }

    @Test func publishNeverOverwritesWithoutReplacing() throws {
        let directory = try TemporaryDirectory()
        let (temporary, path) = (directory.path(".new"), directory.path("db.sqlite"))
        try write("new", to: temporary)
        try write("old", to: path)
        #expect(throws: DurableFiles.Failure.self) {
            try DurableFiles.publish(temporary, as: path, replacing: false)
        }
        do {
            try DurableFiles.publish(temporary, as: path, replacing: false)
        } catch {
            #expect(error.exists)
            #expect(error.path == path)
        }
        // A refusal changes nothing.
        #expect(try read(path) == "old")
        #expect(try read(temporary) == "new")

        try DurableFiles.publish(temporary, as: path, replacing: true)
        #expect(try read(path) == "new")
        #expect(!FileManager.default.fileExists(atPath: temporary))
    }

    @Test func publishLinksAndRemovesTheTemporaryName() throws {
        let directory = try TemporaryDirectory()
        let (temporary, path) = (directory.path(".new"), directory.path("db.sqlite"))
        try write("content", to: temporary)
        try DurableFiles.syncFile(temporary)
        try DurableFiles.publish(temporary, as: path, replacing: false)
        #expect(try read(path) == "content")
        #expect(!FileManager.default.fileExists(atPath: temporary))
    }

    @Test func failuresNameTheFileAndTheCall() throws {
        let directory = try TemporaryDirectory()
        let missing = directory.path("missing.sqlite")
        do {
            try DurableFiles.syncFile(missing)
            Issue.record("a missing file was flushed")
        } catch {
            #expect(error.path == missing)
            #expect(error.operation == "open")
            #expect(!error.exists)
            #expect(error.description.contains(missing))
        }
        #expect(throws: DurableFiles.Failure.self) { try DurableFiles.syncDirectory(directory.path("nowhere")) }
    }

    @Test func removeDatabaseRemovesTheFileAndItsSidecarsOnly() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        for suffix in ["", "-wal", "-shm", "-journal"] { try write("x", to: path + suffix) }
        try write("keep", to: directory.path("db.sqlite-other"))
        try write("keep", to: directory.path("db2.sqlite"))
        DurableFiles.removeDatabase(path)
        for suffix in ["", "-wal", "-shm", "-journal"] {
            #expect(!FileManager.default.fileExists(atPath: path + suffix))
        }
        #expect(FileManager.default.fileExists(atPath: directory.path("db.sqlite-other")))
        #expect(FileManager.default.fileExists(atPath: directory.path("db2.sqlite")))
        // Nothing to remove is fine.
        DurableFiles.removeDatabase(path)
    }
}

/// A tenant with one table, for provisioning.
private struct PlainTenant: TenantRepository {
    static let migrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("createPlayer", migrate: createPlayerTable)
        return migrator
    }()

    let database: RepositoryDatabase

    static func openTenant(_ opening: TenantOpening) throws -> PlainTenant {
        try PlainTenant(database: RepositoryDatabase(opening: opening, migrator: migrator, invariants: []))
    }

    var reader: any DatabaseReader { get throws { try database.reader } }
    var managedDatabase: ManagedDatabase { database.managed }
}

@Suite struct ProvisionPublishTests {
    @Test func concurrentProvisionsOfOneTenantCreateItOnceAndLeaveNothingElse() async throws {
        let root = try TemporaryDirectory()
        let tenants = try TenantDirectory<PlainTenant>(root: root.url("tenants"), connections: DatabaseConnections())
        let acme = try TenantID("acme")
        let outcomes = await withTaskGroup(of: Result<Void, TenantError>.self) { group in
            for _ in 0..<6 {
                group.addTask {
                    do {
                        try tenants.provision(acme)
                        return .success(())
                    } catch let error as TenantError {
                        return .failure(error)
                    } catch {
                        return .failure(.notConfigured)
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.filter { if case .success = $0 { true } else { false } }.count == 1)
        for case let .failure(error) in outcomes { #expect(error == .alreadyExists(acme)) }
        let listing = try #require(tenants.layout).listing()
        #expect(listing.tenants == [acme])
        #expect(listing.provisioningLeftovers.isEmpty)
        // Only the database: no WAL, no journal.
        let names = try FileManager.default.contentsOfDirectory(atPath: root.path("tenants"))
        #expect(names == ["acme.sqlite"])
        // It is whole: migrated, and its invariants (none) hold.
        let lease = try await tenants.lease(acme)
        #expect(try await lease.repository.reader.read { db in try db.tableExists("player") })
        withExtendedLifetime(lease) { }
        await tenants.close()
    }
}
