// What replaying a durable tail costs (issue 33): a tenant restored from
// its base replays every change past the base's sequence number with
// SQLite's changeset apply (`ChangeReplay.apply`). Here, N recorded write
// transactions (each a new player and a score change, the sample's
// writes) are replayed in one transaction onto a copy of the base, against
// the same N transactions' statements executed again with raw GRDB in one
// transaction; for N of 1,000, 10,000 and 20,000 (the tail's bound), on a
// base of 20 and of 30,000 players. Alternating rounds, medians, one
// process. The replay alone: fetching the tail from PostgreSQL and
// restoring the base come on top.
//
//     swift run -c release --package-path Benchmarks TailReplay [rounds]
import Foundation
import GRDB
import GRDBRegistry

let rounds = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 3
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tail-replay-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }

func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

func median(_ values: [Double]) -> Double {
    values.sorted()[values.count / 2]
}

/// The statements of write `index` on a base of `rows` players.
func write(_ db: Database, _ index: Int, rows: Int) throws {
    try db.execute(sql: "INSERT INTO player (name, score) VALUES (?, ?)", arguments: ["w\(index)", index % 100])
    try db.execute(sql: "UPDATE player SET score = score + 1 WHERE id = ?", arguments: [index % rows + 1])
}

/// A base of `rows` players, and the `changes` transactions recorded on
/// top of it (applied to another copy).
func prepare(rows: Int, changes: Int) throws -> (base: String, recorded: [TransactionChange]) {
    let base = folder.appendingPathComponent("base-\(rows)-\(changes).sqlite").path
    let queue = try DatabaseQueue(path: base)
    try queue.write { db in
        try db.execute(sql: "CREATE TABLE player (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL)")
        try ChangeSequence.prepare(db)
        let insert = try db.makeStatement(sql: "INSERT INTO player (name, score) VALUES (?, ?)")
        for index in 0..<rows { try insert.execute(arguments: ["seed\(index)", index % 100]) }
    }
    try queue.close()
    let recording = folder.appendingPathComponent("recording-\(rows)-\(changes).sqlite").path
    try FileManager.default.copyItem(atPath: base, toPath: recording)
    let recorder = try DatabaseQueue(path: recording)
    var recorded: [TransactionChange] = []
    for index in 0..<changes {
        let change = try recorder.write { db -> TransactionChange? in
            let recording = try ChangeRecorder(db)
            try write(db, index, rows: rows)
            return try recording.finish(db)
        }
        guard let change else { fatalError("write \(index) recorded no change") }
        recorded.append(change)
    }
    try recorder.close()
    return (base, recorded)
}

print("| base players | changes | changeset bytes (mean) | replay (ChangeReplay.apply) | raw GRDB, same statements | replay ÷ raw |")
print("|---|---|---|---|---|---|")
for rows in [20, 30_000] {
    for changes in [1_000, 10_000, 20_000] {
        let (base, recorded) = try prepare(rows: rows, changes: changes)
        var replayTimes: [Double] = []
        var rawTimes: [Double] = []
        for round in 0..<rounds {
            let copy = folder.appendingPathComponent("copy-\(round).sqlite").path
            for replay in [true, false] {
                try? FileManager.default.removeItem(atPath: copy)
                try FileManager.default.copyItem(atPath: base, toPath: copy)
                let queue = try DatabaseQueue(path: copy)
                let time = try seconds {
                    try queue.write { db in
                        if replay {
                            _ = try ChangeReplay.apply(recorded, to: db)
                        } else {
                            for index in 0..<changes { try write(db, index, rows: rows) }
                        }
                    }
                }
                if replay {
                    let sequence = try queue.read { try ChangeSequence.current($0) }
                    guard sequence == UInt64(changes) else { fatalError("replayed to \(sequence), not \(changes)") }
                    replayTimes.append(time)
                } else {
                    rawTimes.append(time)
                }
                try queue.close()
            }
        }
        let bytes = recorded.reduce(0) { $0 + $1.changeset.count } / recorded.count
        let replay = median(replayTimes), raw = median(rawTimes)
        print("| \(rows) | \(changes) | \(bytes) | \(String(format: "%.3f", replay)) s | \(String(format: "%.3f", raw)) s | \(String(format: "%.2f", replay / raw))× |")
    }
}
