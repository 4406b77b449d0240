import GRDB
@testable import GRDBRegistry
import Testing

private struct PlayersKey: DatabaseKey {
    static var defaultValue: DatabaseContext { .notConnected }
}

private struct ScoreLimitKey: DatabaseKey {
    static var defaultValue: Int { 100 }
}

private struct ArchiveDatabaseKey: DatabaseKey {
    static var defaultValue: DatabaseContext { .notConnected }
    static var name: String { "archive" }
}

private struct OtherArchiveKey: DatabaseKey {
    static var defaultValue: DatabaseContext { .notConnected }
    static var name: String { "archive" }
}

/// A container of named databases, as a tenant directory is.
private struct Shelf: NamedDatabaseContainer {
    var databases: [String: DatabaseQueue]

    func value(named name: String) throws -> any Sendable {
        guard let database = databases[name] else {
            throw DatabaseRegistryError.unknownName(name, knownNames: databases.keys.sorted())
        }
        return database
    }
}

private struct ShelfKey: DatabaseKey {
    static var defaultValue: Shelf { Shelf(databases: [:]) }
}

extension DatabaseRegistry {
    fileprivate var players: DatabaseContext {
        get { self[PlayersKey.self] }
        set { self[PlayersKey.self] = newValue }
    }

    fileprivate var scoreLimit: Int {
        get { self[ScoreLimitKey.self] }
        set { self[ScoreLimitKey.self] = newValue }
    }

    fileprivate var shelf: Shelf {
        get { self[ShelfKey.self] }
        set { self[ShelfKey.self] = newValue }
    }
}

@Suite struct DatabaseRegistryTests {
    @Test func unregisteredKeysReturnTheirDefaultValue() throws {
        let registry = DatabaseRegistry()
        #expect(registry.scoreLimit == 100)
        #expect(!registry.contains(ScoreLimitKey.self))
        #expect(throws: DatabaseContextError.notConnected) { try registry.players.reader }
        #expect(throws: DatabaseContextError.notConnected) { try registry.databaseContext.reader }
    }

    @Test func keyPathLookupReturnsTheRegisteredValue() throws {
        let queue = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        var registry = DatabaseRegistry()
        registry.players = .readWrite { queue }
        registry.scoreLimit = 7

        #expect(registry[keyPath: \.scoreLimit] == 7)
        #expect(try registry[keyPath: \.players].writer === queue)
        #expect(registry.contains(PlayersKey.self))

        registry.removeValue(for: ScoreLimitKey.self)
        #expect(registry.scoreLimit == 100)
    }

    @Test func overridingACopyLeavesTheOriginalUntouched() throws {
        let first = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        let second = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        var registry = DatabaseRegistry()
        registry.players = .readWrite { first }
        registry.databaseContext = .readWrite { first }

        var copy = registry
        copy.players = .readWrite { second }
        copy.scoreLimit = 1

        #expect(try registry.players.writer === first)
        #expect(registry.scoreLimit == 100)
        #expect(try copy.players.writer === second)
        // The entry the copy did not override is shared.
        #expect(try copy.databaseContext.writer === first)
    }

    @Test func keysAreNamedAfterTheirType() {
        #expect(PlayersKey.name == "players")
        #expect(ScoreLimitKey.name == "scoreLimit")
        #expect(DatabaseContextKey.name == "databaseContext")
        #expect(ArchiveDatabaseKey.name == "archive")
        #expect(defaultDatabaseName(forKeyTypeName: "Key") == "key")
        #expect(defaultDatabaseName(forKeyTypeName: "TenantsKey<Int>") == "tenants")
    }

    @Test func registeredDatabasesCanBeFoundByName() throws {
        let queue = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        try queue.write { db in try db.execute(sql: "CREATE TABLE t(a)") }
        var registry = DatabaseRegistry()
        registry.players = .readWrite { queue }
        registry.scoreLimit = 3

        #expect(registry.registeredNames == ["players", "scoreLimit"])
        #expect(try registry.value(named: "scoreLimit") as? Int == 3)
        let reader = try registry.reader(named: "players")
        #expect(try reader.read { db in try db.tableExists("t") })
    }

    @Test func unknownNamesListTheKnownOnes() throws {
        var registry = DatabaseRegistry()
        registry.players = .notConnected
        registry.scoreLimit = 3
        #expect(throws: DatabaseRegistryError.unknownName("plyers", knownNames: ["players", "scoreLimit"])) {
            try registry.value(named: "plyers")
        }
        let error = #expect(throws: DatabaseRegistryError.self) { try registry.reader(named: "nope") }
        #expect(error?.description.contains("players, scoreLimit") == true)
    }

    @Test func namesReachDatabasesInsideContainers() throws {
        let acme = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        try acme.write { db in try db.execute(sql: "CREATE TABLE acme(a)") }
        var registry = DatabaseRegistry()
        registry.shelf = Shelf(databases: ["acme": acme])
        registry.scoreLimit = 1

        let reader = try registry.reader(named: "shelf/acme")
        #expect(try reader.read { db in try db.tableExists("acme") })
        #expect(throws: DatabaseRegistryError.unknownName("globex", knownNames: ["acme"])) {
            try registry.reader(named: "shelf/globex")
        }
        #expect(throws: DatabaseRegistryError.notAContainer("scoreLimit/x")) {
            try registry.value(named: "scoreLimit/x")
        }
        #expect(throws: DatabaseRegistryError.notADatabase("scoreLimit", valueType: "Int")) {
            try registry.reader(named: "scoreLimit")
        }
    }

    @Test func twoKeysWithOneNameMakeNamedLookupsFail() throws {
        var registry = DatabaseRegistry()
        registry[ArchiveDatabaseKey.self] = .notConnected
        registry[OtherArchiveKey.self] = .notConnected
        let error = #expect(throws: DatabaseRegistryError.self) { try registry.value(named: "archive") }
        guard case let .ambiguousName(name, keyTypes)? = error else {
            Issue.record("unexpected error \(String(describing: error))")
            return
        }
        #expect(name == "archive")
        #expect(keyTypes.count == 2)
    }

    @Test func currentRegistryIsScopedToTheTask() async throws {
        let queue = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        var registry = DatabaseRegistry()
        registry.players = .readWrite { queue }

        #expect(!DatabaseRegistry.current.contains(PlayersKey.self))
        try await withRegistry(registry) {
            #expect(try DatabaseRegistry.current.players.writer === queue)
            // Child tasks inherit the registry.
            let inherited = try await Task { try DatabaseRegistry.current.players.writer === queue }.value
            #expect(inherited)
            try await withRegistry({ $0.scoreLimit = 5 }) { () async throws in
                #expect(DatabaseRegistry.current.scoreLimit == 5)
                #expect(try DatabaseRegistry.current.players.writer === queue)
            }
            #expect(DatabaseRegistry.current.scoreLimit == 100)
        }
        #expect(!DatabaseRegistry.current.contains(PlayersKey.self))
        try withRegistry(registry) { () throws in
            #expect(try DatabaseRegistry.current.players.writer === queue)
        }
    }
}
