import Foundation
import GRDB
import GRDBMigrations
import GRDBSQLite

// A migration set folder built from the input: NUL-separated parts, the
// first the content of migration-set.json (absent when empty), then file
// name and file content pairs. The set loads, or throws MigrationSetError;
// a loaded set then migrates an in-memory database, or throws a
// MigrationError. Nothing else passes.

private let root: URL = {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("FuzzMigrationSet-\(getpid())")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}()

/// Statements that reach outside the in-memory database (ATTACH, VACUUM
/// INTO) are not run: the harness must not write files the fuzzer names.
private func touchesFiles(_ sql: String) -> Bool {
    let upper = sql.uppercased()
    return upper.contains("ATTACH") || upper.contains("VACUUM") || upper.contains("LOAD_EXTENSION")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let parts = UnsafeBufferPointer(start: start, count: count).split(separator: 0, omittingEmptySubsequences: false).map { Data($0) }
    let directory = root.appendingPathComponent("set")
    try? FileManager.default.removeItem(at: directory)
    do {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    } catch {
        fatalError("can't create \(directory.path): \(error)")
    }
    defer { try? FileManager.default.removeItem(at: directory) }

    if let declaration = parts.first, !declaration.isEmpty {
        try? declaration.write(to: directory.appendingPathComponent(MigrationSet.declarationFileName))
    }
    var index = 1
    var sqlTexts: [String] = []
    while index + 1 < parts.count {
        let name = String(decoding: parts[index], as: UTF8.self)
        let content = parts[index + 1]
        index += 2
        // Names the file system can't hold say nothing about the parser.
        guard !name.isEmpty, name != ".", name != "..", !name.contains("/"), name.utf8.count < 200 else { continue }
        try? content.write(to: directory.appendingPathComponent(name))
        sqlTexts.append(String(decoding: content, as: UTF8.self))
    }

    let set: MigrationSet
    do {
        set = try MigrationSet(directory: directory)
    } catch is MigrationSetError {
        return 0
    } catch {
        fatalError("MigrationSet(directory:) threw an untyped error: \(error)")
    }
    // Numbers are unique and in order.
    let identifiers = set.identifiers
    guard Set(identifiers).count == identifiers.count else { fatalError("duplicate identifiers: \(identifiers)") }

    guard !sqlTexts.contains(where: touchesFiles) else { return 0 }
    // The progress handler's budget, per input: a C callback captures
    // nothing, so it gets this pointer as its context.
    let budget = UnsafeMutablePointer<Int>.allocate(capacity: 1)
    budget.initialize(to: 100)
    defer { budget.deallocate() }
    do {
        let queue = try DatabaseQueue()
        // Closed before the budget is deallocated: the handler points at it.
        defer { try? queue.close() }
        // A bounded amount of work per input: WITH RECURSIVE never ends.
        queue.inDatabase { db in
            sqlite3_progress_handler(db.sqliteConnection, 10_000, { budget in
                guard let budget = budget?.assumingMemoryBound(to: Int.self) else { return 1 }
                budget.pointee -= 1
                return budget.pointee < 0 ? 1 : 0
            }, UnsafeMutableRawPointer(budget))
            sqlite3_limit(db.sqliteConnection, SQLITE_LIMIT_LENGTH, 1_000_000)
        }
        budget.pointee = 100
        try DatabaseMigrationRunner(set: set).migrate(queue)
    } catch is MigrationError {
    } catch is DatabaseError {
        // Errors outside a migration's statements (GRDB's own bookkeeping,
        // interrupted by the progress handler).
    } catch {
        fatalError("migrate threw an untyped error: \(error)")
    }
    return 0
}
