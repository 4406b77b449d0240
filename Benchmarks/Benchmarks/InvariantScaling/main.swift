// The cost of a checked repository write as the table grows: the players
// repository's invariants, written over the changed rows, at 100 and at
// 1,000,000 players, in alternating rounds in one process; and, for scale,
// the same rules in their whole-table form (what every write paid before).
//
//     swift run -c release --package-path Benchmarks InvariantScaling [writes]
import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples

let writes = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 4_000
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("invariant-scaling-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }

/// A players database of `rows` players over 1,000 teams, seeded with raw
/// GRDB (no checks), then opened as a repository with `invariants`.
func repository(rows: Int, invariants: [DatabaseInvariant], name: String) throws -> RepositoryDatabase {
    let path = folder.appendingPathComponent("\(name).sqlite").path
    do {
        let pool = try DatabasePool(path: path)
        try PlayerRepository.migrator.migrate(pool)
        try pool.write { db in
            let insert = try db.makeStatement(sql: "INSERT INTO player (name, score, team) VALUES (?, ?, ?)")
            for index in 0..<rows {
                try insert.execute(arguments: ["player\(index)", index % 1_000, "team\(index % 1_000)"])
            }
        }
        try pool.close()
    }
    return try RepositoryDatabase(path: path, name: name, migrator: PlayerRepository.migrator, invariants: invariants, connections: DatabaseConnections())
}

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// The two statements of one write: a new player, then a score change.
func updates(_ db: Database, _ index: Int) throws {
    try db.execute(sql: "INSERT INTO player (name, score, team) VALUES (?, ?, ?)", arguments: ["new\(index)", index % 50, "team\(index % 1_000)"])
    try db.execute(sql: "UPDATE player SET score = score + 1 WHERE id = ?", arguments: [index % 90 + 1])
}

func microseconds(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6
}

/// One checked write, in one transaction.
func write(_ database: RepositoryDatabase, _ index: Int) throws -> Double {
    try microseconds { try database.write { db in try updates(db, index) } }
}

/// The same write through raw GRDB: no checks at all (the baseline).
func write(_ pool: DatabasePool, _ index: Int) throws -> Double {
    try microseconds { try pool.write { db in try updates(db, index) } }
}

/// A raw GRDB pool on a seeded copy: what the write costs without checks.
func rawPool(rows: Int, name: String) throws -> DatabasePool {
    let repository = try repository(rows: rows, invariants: [], name: name)
    let path = repository.managed.writer.path
    try repository.close()
    return try DatabasePool(path: path)
}

let small = try repository(rows: 100, invariants: PlayerRepository.invariants, name: "small")
let big = try repository(rows: 1_000_000, invariants: PlayerRepository.invariants, name: "big")
var smallTimes: [Double] = [], bigTimes: [Double] = []
for index in 0..<writes {
    // Alternating, so that the machine's drift touches both alike.
    if index % 2 == 0 {
        smallTimes.append(try write(small, index)); bigTimes.append(try write(big, index))
    } else {
        bigTimes.append(try write(big, index)); smallTimes.append(try write(small, index))
    }
}
// Raw GRDB at both sizes, alternating too: the part of the growth that is
// SQLite's own (a deeper B-tree, two indexes), not the checks'.
let rawSmall = try rawPool(rows: 100, name: "raw-small")
let rawBig = try rawPool(rows: 1_000_000, name: "raw-big")
var rawSmallTimes: [Double] = [], rawBigTimes: [Double] = []
for index in 0..<writes {
    if index % 2 == 0 {
        rawSmallTimes.append(try write(rawSmall, index)); rawBigTimes.append(try write(rawBig, index))
    } else {
        rawBigTimes.append(try write(rawBig, index)); rawSmallTimes.append(try write(rawSmall, index))
    }
}
rawSmallTimes.sort(); rawBigTimes.sort()
try rawSmall.close(); try rawBig.close()
smallTimes.sort(); bigTimes.sort()
let smallP50 = percentile(smallTimes, 0.5), bigP50 = percentile(bigTimes, 0.5)
let smallP99 = percentile(smallTimes, 0.99), bigP99 = percentile(bigTimes, 0.99)
print("changed-row invariants, \(writes) writes each (insert + update in one transaction):")
print(String(format: "  100 rows:       p50 %.1f µs  p99 %.1f µs", smallP50, smallP99))
print(String(format: "  1,000,000 rows: p50 %.1f µs  p99 %.1f µs", bigP50, bigP99))
print(String(format: "  ratio 1M/100:   p50 %.2f×  p99 %.2f×", bigP50 / smallP50, bigP99 / smallP99))
let rawSmallP50 = percentile(rawSmallTimes, 0.5), rawBigP50 = percentile(rawBigTimes, 0.5)
print("raw GRDB, no checks, same writes:")
print(String(format: "  100 rows:       p50 %.1f µs  p99 %.1f µs", rawSmallP50, percentile(rawSmallTimes, 0.99)))
print(String(format: "  1,000,000 rows: p50 %.1f µs  p99 %.1f µs", rawBigP50, percentile(rawBigTimes, 0.99)))
print(String(format: "  ratio 1M/100:   p50 %.2f×", rawBigP50 / rawSmallP50))
print(String(format: "checked / raw: p50 %.2f× at 100 rows, %.2f× at 1,000,000 rows", smallP50 / rawSmallP50, bigP50 / rawBigP50))

// The whole-table form of the same rules, for scale: few writes, each one
// scans the million rows.
let wholeTable: [DatabaseInvariant] = [
    .sql("nonNegativeScore", "SELECT id, name, score FROM player WHERE score < 0"),
    .sql("uniqueNamePerTeam", "SELECT team, name FROM player GROUP BY team, name HAVING COUNT(*) > 1"),
]
try big.close()
let bigWhole = try repository(rows: 1_000_000, invariants: wholeTable, name: "big-whole")
var wholeTimes = try (0..<20).map { try write(bigWhole, $0) }
wholeTimes.sort()
print(String(format: "whole-table invariants, 1,000,000 rows, 20 writes: p50 %.1f µs (%.0f× the changed-row form)", percentile(wholeTimes, 0.5), percentile(wholeTimes, 0.5) / bigP50))
try small.close(); try bigWhole.close()
