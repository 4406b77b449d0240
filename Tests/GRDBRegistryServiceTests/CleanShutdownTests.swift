import Foundation
import GRDB
import GRDBRegistry
@testable import GRDBRegistryService
import ServiceLifecycleTestKit
import Testing

@Suite struct CleanShutdownTests {
    /// The documented promise of a clean shutdown: the journal is
    /// truncated, and no `-wal` (nor `-shm`) is left beside the database,
    /// even after reads opened the pool's read-only connections.
    @Test(arguments: [false, true])
    func aCleanShutdownLeavesNoWALNorSharedMemoryFile(encrypted: Bool) async throws {
        _ = testMetrics
        let directory = try TemporaryDirectory()
        let path = directory.path("clean.sqlite")
        let name = encrypted ? "clean_encrypted" : "clean_plain"
        let configuration = RegistryConfiguration(
            databases: [.init(name: name, path: path, key: encrypted ? .environment("CLEAN_KEY") : nil)])
        let service = DatabaseService(
            configuration: configuration, environment: ["CLEAN_KEY": "clean passphrase"], logger: LogRecorder().logger())
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                let writer = try service.writer(named: name)
                try await writer.write { db in
                    try db.execute(sql: "CREATE TABLE note(text TEXT); INSERT INTO note VALUES ('kept')")
                }
                // Concurrent reads: several reader connections are open at shutdown.
                try await withThrowingTaskGroup(of: Int.self) { reads in
                    for _ in 0..<4 {
                        reads.addTask { try await writer.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM note") ?? 0 } }
                    }
                    for try await count in reads { #expect(count == 1) }
                }
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        #expect(service.phase == .stopped)
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
        #expect(FileManager.default.fileExists(atPath: path))
    }
}
