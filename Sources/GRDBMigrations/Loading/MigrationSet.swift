import Foundation
import GRDB

/// An ordered set of migrations for one kind of database, loaded from a
/// folder of `NNNN_description.sql` files, with optional Swift migrations
/// mixed in.
///
/// Each migration runs in its own transaction and is recorded by GRDB's
/// `DatabaseMigrator` under its identifier (the file name for SQL files):
///
/// ```swift
/// let set = try MigrationSet(directory: URL(fileURLWithPath: "Migrations/players"))
/// let dbQueue = try DatabaseQueue(path: "players.sqlite")
/// try set.makeMigrator().migrate(dbQueue)
/// ```
///
/// Prefer ``DatabaseMigrationRunner`` to `makeMigrator().migrate(_:)`: it also
/// refuses to run when an applied file was edited, and is safe when two
/// processes migrate the same file at once.
///
/// ## Locating the `Migrations/` folder
///
/// The set is read from a directory URL, so the caller decides where it lives:
///
/// - A daemon or a script passes a path (`registryctl --migrations Migrations/players`,
///   or a `migrations` entry of a `RegistryConfiguration` file, in GRDBRegistryService).
/// - A package that ships its migrations copies the folder as a resource,
///   `resources: [.copy("Migrations/players")]` in its target, and loads it with
///   `Bundle.module.url(forResource: "players", withExtension: nil)` (nil when the
///   resource is missing from the target: report that as a packaging error).
///   `.copy` keeps the folder and its file names intact (`.process` could flatten it).
/// - Tests of this package find the repository's `Migrations/` folder relative
///   to `#filePath`.
///
/// ## Validation
///
/// Loading fails with a ``MigrationSetError``, before any database is touched,
/// on: a name that is not `NNNN_description.sql`, a sub-folder, an unreadable or
/// non-UTF-8 file, a number used twice, or a missing number when the set forbids
/// gaps. Names starting with `.` (editor and Finder files) are ignored. A set
/// forbids gaps with a `migration-set.json` file next to the migrations:
/// `{"allowsGaps": false}`; numbers must then run 1, 2, 3… with no hole.
public struct MigrationSet: Sendable {
    /// The set's name: the folder name for a set loaded from a directory.
    public let name: String
    /// Whether numbers may skip values (`0001`, `0003`).
    public let allowsGaps: Bool
    /// The migrations, in the order they apply.
    public let migrations: [MigrationStep]

    /// The name of the optional declaration file of a set folder.
    public static let declarationFileName = "migration-set.json"

    private struct Declaration: Decodable {
        var allowsGaps: Bool?
    }

    /// Loads every `NNNN_description.sql` file of `directory`.
    ///
    /// ```swift
    /// let set = try MigrationSet(directory: migrationsRoot.appendingPathComponent("players"))
    /// ```
    ///
    /// - parameter directory: The set folder.
    /// - parameter swiftMigrations: Swift migrations to interleave by number.
    /// - parameter allowsGaps: Overrides the folder's `migration-set.json`
    ///   declaration when not nil.
    /// - throws: ``MigrationSetError``.
    public init(directory: URL, swiftMigrations: [SwiftMigration] = [], allowsGaps: Bool? = nil) throws {
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw MigrationSetError.directoryNotFound(path: directory.path)
        }
        let names: [String]
        do {
            names = try fileManager.contentsOfDirectory(atPath: directory.path).sorted()
        } catch {
            throw MigrationSetError.directoryUnreadable(path: directory.path, reason: String(describing: error))
        }

        var declaredAllowsGaps = true
        var files: [SQLMigrationFile] = []
        for name in names where !name.hasPrefix(".") {
            let url = directory.appendingPathComponent(name)
            var entryIsDirectory: ObjCBool = false
            _ = fileManager.fileExists(atPath: url.path, isDirectory: &entryIsDirectory)
            if entryIsDirectory.boolValue {
                throw MigrationSetError.unexpectedDirectory(path: url.path)
            }
            if name == Self.declarationFileName {
                declaredAllowsGaps = try Self.readDeclaration(url).allowsGaps ?? true
                continue
            }
            guard MigrationFileName.parse(name) != nil else {
                throw MigrationSetError.invalidFileName(path: url.path)
            }
            files.append(try SQLMigrationFile(url: url))
        }
        try self.init(
            name: directory.lastPathComponent,
            sqlFiles: files,
            swiftMigrations: swiftMigrations,
            allowsGaps: allowsGaps ?? declaredAllowsGaps,
            setPath: directory.path)
    }

    /// Builds a set from files already in memory (for example read from a
    /// resource bundle or an archive).
    ///
    /// ```swift
    /// let set = try MigrationSet(name: "players", sqlFiles: [
    ///     SQLMigrationFile(identifier: "0001_create_player.sql", sql: "CREATE TABLE player(id INTEGER PRIMARY KEY)"),
    /// ])
    /// ```
    ///
    /// - throws: ``MigrationSetError``.
    public init(
        name: String,
        sqlFiles: [SQLMigrationFile],
        swiftMigrations: [SwiftMigration] = [],
        allowsGaps: Bool = true
    ) throws {
        try self.init(name: name, sqlFiles: sqlFiles, swiftMigrations: swiftMigrations, allowsGaps: allowsGaps, setPath: name)
    }

    private init(
        name: String,
        sqlFiles: [SQLMigrationFile],
        swiftMigrations: [SwiftMigration],
        allowsGaps: Bool,
        setPath: String
    ) throws {
        var steps: [MigrationStep] = []
        for file in sqlFiles {
            guard let parsed = MigrationFileName.parse(file.identifier) else {
                throw MigrationSetError.invalidFileName(path: file.path)
            }
            steps.append(MigrationStep(number: parsed.number, identifier: file.identifier, body: .sql(file)))
        }
        for swift in swiftMigrations {
            guard MigrationFileName.isValidDescription(swift.description), swift.number >= 0 else {
                throw MigrationSetError.invalidSwiftMigrationName(swift.description)
            }
            steps.append(MigrationStep(number: swift.number, identifier: swift.identifier, body: .swift(swift.migrate)))
        }
        steps.sort { ($0.number, $0.identifier) < ($1.number, $1.identifier) }

        for (number, group) in Dictionary(grouping: steps, by: \.number) where group.count > 1 {
            throw MigrationSetError.duplicateNumber(number, identifiers: group.map(\.identifier).sorted())
        }
        if !allowsGaps, let last = steps.last?.number {
            let present = Set(steps.map(\.number))
            if let missing = (1...max(last, 1)).first(where: { !present.contains($0) }) {
                throw MigrationSetError.missingNumber(missing, setPath: setPath)
            }
        }
        self.name = name
        self.allowsGaps = allowsGaps
        self.migrations = steps
    }

    private static func readDeclaration(_ url: URL) throws -> Declaration {
        do {
            return try JSONDecoder().decode(Declaration.self, from: Data(contentsOf: url))
        } catch {
            throw MigrationSetError.invalidDeclaration(path: url.path, reason: String(describing: error))
        }
    }

    /// The identifiers of the migrations, in order.
    public var identifiers: [String] { migrations.map(\.identifier) }

    /// Returns a `DatabaseMigrator` that applies this set.
    ///
    /// Each SQL migration runs its statements one by one so that a failure
    /// names the file and line (``MigrationError/statementFailed(identifier:path:line:statement:reason:)``),
    /// stores the file's checksum in the same transaction, and throws
    /// ``MigrationError/appliedConcurrently(identifier:)`` instead of running
    /// twice when another connection applied it first.
    ///
    /// ```swift
    /// var migrator = set.makeMigrator()
    /// migrator.registerMigration("0100_app_specific") { db in
    ///     try db.execute(sql: "CREATE INDEX player_on_team ON player(team)")
    /// }
    /// try migrator.migrate(dbQueue)
    /// ```
    public func makeMigrator() -> DatabaseMigrator {
        makeMigrator(didCommit: nil)
    }

    /// - parameter didCommit: Called with the identifier of each migration
    ///   that this migrator committed (not those another connection applied).
    func makeMigrator(didCommit: (@Sendable (String) -> Void)?) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for step in migrations {
            let identifier = step.identifier
            let body = step.body
            migrator.registerMigration(identifier) { db in
                try ChecksumStore.ensureNotApplied(identifier, db)
                switch body {
                case .sql(let file):
                    try SQLScript(file: file).execute(in: db)
                    try ChecksumStore.record(identifier: identifier, checksum: file.checksum, db)
                case .swift(let migrate):
                    try migrate(db)
                }
                if let didCommit {
                    db.afterNextTransaction(onCommit: { _ in didCommit(identifier) })
                }
            }
        }
        return migrator
    }
}
