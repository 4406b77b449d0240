// Runs as is, in a temporary directory: `swift run RegistryGettingStarted`.

import Foundation
import GRDB
import GRDBRegistry
// snippet.hide
let directory = FileManager.default.temporaryDirectory
    .appendingPathComponent("RegistryGettingStarted-\(UUID().uuidString)").path
try FileManager.default.createDirectory(
    atPath: directory, withIntermediateDirectories: true)
// snippet.show

// 1. One key, and one registry property, per database.
struct CatalogKey: DatabaseKey {
    static var defaultValue: DatabaseContext { .notConnected }
}
struct AuditKey: DatabaseKey {
    static var defaultValue: DatabaseContext { .notConnected }
}
extension DatabaseRegistry {
    var catalog: DatabaseContext {
        get { self[CatalogKey.self] }
        set { self[CatalogKey.self] = newValue }
    }
    var audit: DatabaseContext {
        get { self[AuditKey.self] }
        set { self[AuditKey.self] = newValue }
    }
}

// 2. A value the daemon keeps up to date.
struct ItemCountRequest: ValueObservationQueryable {
    static var defaultValue: Int { 0 }
    func fetch(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item") ?? 0
    }
}

// 3. Open each file once, create its schema, register it.
let catalog = try ManagedDatabase(path: "\(directory)/catalog.sqlite")
let audit = try ManagedDatabase(path: "\(directory)/audit.sqlite")
try catalog.write { db in
    try db.execute(sql: "CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT)")
}
try audit.write { db in
    try db.execute(sql: "CREATE TABLE event (id INTEGER PRIMARY KEY, text TEXT)")
}
var registry = DatabaseRegistry()
registry.catalog = catalog.context
registry.audit = audit.context

// 4. Serve: code deep in the daemon finds its databases in the registry.
try await withRegistry(registry) {
    let itemCount = Query(ItemCountRequest(), in: \.catalog)  // fetched now
    try await DatabaseRegistry.current.catalog.writer.write { db in
        try db.execute(sql: "INSERT INTO item (name) VALUES ('lamp')")
    }
    try await DatabaseRegistry.current.audit.writer.write { db in
        try db.execute(sql: "INSERT INTO event (text) VALUES ('added lamp')")
    }
    for try await count in itemCount.updates where count > 0 {
        print("items: \(count)")                 // the query saw the commit
        break
    }
}

// 5. Shut down: queued writes commit, later ones are refused; then
// observations end, the WAL is checkpointed, and the files close.
for database in [catalog, audit] {
    await database.drain(timeout: .seconds(5))
    try database.close()
}
// snippet.hide
try FileManager.default.removeItem(atPath: directory)
