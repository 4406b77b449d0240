// A restricted-write repository on a database of the daemon's configuration.
// snippet.hide
import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryService
import Logging
import ServiceLifecycle

// snippet.show
// snippet.ledger
/// A ledger whose balance never goes below zero: every write is checked.
struct Ledger: Sendable {
    static let migrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("createEntry") { db in
            try db.execute(sql: "CREATE TABLE entry (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)")
        }
        return migrator
    }()

    static let invariants: [DatabaseInvariant] = [
        .sql("nonNegativeBalance", """
            SELECT total FROM (SELECT SUM(amount) AS total FROM entry) WHERE total < 0
            """),
    ]

    private let database: RepositoryDatabase

    init(database: RepositoryDatabase) {
        self.database = database
    }

    func record(_ amount: Int) async throws {
        try await database.write { db in
            try db.execute(sql: "INSERT INTO entry (amount) VALUES (?)", arguments: [amount])
        }
    }
}

// snippet.app
struct LedgerServer: Service {
    let databases: DatabaseService

    func run() async throws {
        try await databases.waitUntilReady()
        let ledger = Ledger(database: try databases.repository(named: "ledger"))
        try await ledger.record(10)
        try await gracefulShutdown()
    }
}

// snippet.main
let logger = Logger(label: "ledger")
let configuration = try RegistryConfiguration.load(
    contentsOf: URL(fileURLWithPath: "registry.json"))
let databases = DatabaseService(configuration: configuration, logger: logger)
// Before run(): the service opens "ledger" as a repository, with these
// migrations and invariants, and still drains, checkpoints and reports it.
try databases.declareRepository(
    named: "ledger", migrator: Ledger.migrator, invariants: Ledger.invariants)

let group = ServiceGroup(configuration: ServiceGroupConfiguration(
    services: [databases, LedgerServer(databases: databases)],
    gracefulShutdownSignals: [.sigterm],
    logger: logger))
try await group.run()
// snippet.end
