import Foundation
import GRDB
import GRDBBackup
import GRDBRegistry
import InMemoryTracing
import Testing
import Tracing

/// Backups and restores are spans of the caller's tracer, under the
/// caller's span; a refused restore records its error there.
@Suite struct BackupSpansTests {
    @Test func aBackupAndARestoreAreSpansUnderTheCallersSpanAndARefusalIsRecorded() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.path("catalog.sqlite"))
        try queue.write { db in try db.execute(sql: "CREATE TABLE t(x); INSERT INTO t VALUES ('row-value')") }
        let tracer = InMemoryTracer()

        try tracer.withSpan("nightly backup") { _ in
            let backup = try BackupSet(creatingAt: directory.url("backup"), logger: testLogger, tracer: tracer)
            try backup.add(.database, named: "catalog", from: queue)
            _ = try backup.finish()
        }
        let restore = try BackupRestore(from: directory.url("backup"), logger: testLogger, tracer: tracer)
        _ = try tracer.withSpan("recovery") { _ in
            try restore.restoreDatabase(named: "catalog", to: directory.path("restored/catalog.sqlite"))
        }
        // Restoring over the restored file without `force` is refused.
        #expect(throws: BackupError.destinationExists(path: directory.path("restored/catalog.sqlite"))) {
            try restore.restoreDatabase(named: "catalog", to: directory.path("restored/catalog.sqlite"))
        }
        let restoreSpans = tracer.popFinishedSpans()

        // A copy outside a set: its span names the database as its errors do.
        _ = try DatabaseBackup.backUp(queue, to: directory.url("copy.sqlite"), name: "scratch", tracer: tracer)
        let copy = try #require(tracer.popFinishedSpans().first)
        #expect(copy.operationName == "sqlite.backup" && copy.attributes.get("db.namespace") == .string("scratch"))
        try queue.close()

        let spans = restoreSpans
        let parents = Dictionary(spans.map { ($0.operationName, $0.spanID) }, uniquingKeysWith: { first, _ in first })
        let backups = spans.filter { $0.operationName == DatabaseSpan.Name.backup.rawValue }
        let restores = spans.filter { $0.operationName == DatabaseSpan.Name.restore.rawValue }
        try #require(backups.count == 1 && restores.count == 2, "\(spans.map(\.operationName))")
        #expect(backups[0].parentSpanID == parents["nightly backup"])
        #expect(backups[0].attributes.get("db.namespace") == .string("catalog"))
        #expect(backups[0].attributes.get("db.operation.name") == .string("backup"))
        #expect(backups[0].status == nil)
        #expect(restores[0].parentSpanID == parents["recovery"])
        #expect(restores[0].attributes.get("db.namespace") == .string("catalog"))
        #expect(restores[0].attributes.get("db.operation.name") == .string("restore"))
        #expect(restores[0].status == nil)
        #expect(restores[1].status?.code == .error)
        #expect(restores[1].errors.first?.error as? BackupError == .destinationExists(path: directory.path("restored/catalog.sqlite")))
        for span in spans {
            var texts: [String] = []
            span.attributes.forEach { key, value in texts.append("\(key)=\(value)") }
            #expect(!texts.contains { $0.contains("row-value") })
        }
    }
}
