import CFaultInjectionVFS
import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import Testing

/// Every fault of ``FaultKind/all`` at every call index of representative
/// write operations, plain and encrypted, WAL and rollback: the operation
/// fails with a typed error, and once the fault clears the database opens,
/// passes its integrity check, and holds exactly the acknowledged
/// transactions.
///
/// One suite, serialized: the fault VFS is process-wide (faults only touch
/// the files of the running test's directory).
@Suite(.serialized) struct FaultMatrixTests {
    static let scenarios: [FaultScenario] = [false, true].flatMap { encrypted in
        [
            FaultScenario.transaction(.wal, encrypted: encrypted),
            FaultScenario.transaction(.rollback, encrypted: encrypted),
            FaultScenario.checkpoint(encrypted: encrypted),
            FaultScenario.repositoryWrite(encrypted: encrypted),
            FaultScenario.migration(.wal, encrypted: encrypted),
            FaultScenario.migration(.rollback, encrypted: encrypted),
            FaultScenario.provision(encrypted: encrypted),
            FaultScenario.remove(encrypted: encrypted),
            FaultScenario.backup(encrypted: encrypted),
        ]
    } + [FaultScenario.rekey()]

    @Test func theShimSitsBelowTheCipherVFS() throws {
        try FaultInjection.checkInstalled()
        // Installed when the binary loaded, over the system VFS; the cipher
        // VFS, registered later, wraps it.
        #expect(FaultInjection.underlyingVFSName == "unix")
        _ = try encryptedConfiguration(true)
        #expect(sqlite3_vfs_find(nil).map { String(cString: $0.pointee.zName) } == "grdbcipher")
    }

    @Test func countingSeesTheCallsOfAWrite() async throws {
        try FaultInjection.checkInstalled()
        let root = try TemporaryDirectory()
        let directory = try root.subdirectory("count")
        let operation = try await FaultScenario.transaction(.rollback, encrypted: false).prepare(directory)
        let calls = try await FaultInjection.count(under: directory + "/") { try await operation.run() }
        operation.close()
        // A rollback-journal commit writes the journal and the database,
        // syncs both, and deletes the journal.
        #expect(calls[.write, default: 0] > 0)
        #expect(calls[.sync, default: 0] >= 2)
        #expect(calls[.delete, default: 0] >= 1)
        #expect(calls[.open, default: 0] >= 1)
    }

    @Test func anInjectedFaultFailsTheOperationAndClears() async throws {
        try FaultInjection.checkInstalled()
        let root = try TemporaryDirectory()
        let directory = try root.subdirectory("inject")
        let operation = try await FaultScenario.transaction(.rollback, encrypted: false).prepare(directory)
        let kind = FaultKind(name: "ENOSPC", operation: .write, code: ResultCode.SQLITE_FULL.rawValue, persistent: true)
        let (result, injected) = await FaultInjection.inject(kind, at: 0, under: directory + "/") { try await operation.run() }
        #expect(injected >= 1)
        guard case .failure(let error as DatabaseError) = result else {
            Issue.record("expected a DatabaseError, got \(result)")
            return
        }
        #expect(error.resultCode == .SQLITE_FULL)
        // Cleared: the same connection writes again.
        try await operation.run()
        operation.close()
        #expect(try operation.check(true) == .acknowledged)
    }

    @Test func aFaultOnlyTouchesTheFilesUnderItsPrefix() async throws {
        try FaultInjection.checkInstalled()
        let root = try TemporaryDirectory()
        let faulty = try await FaultScenario.transaction(.rollback, encrypted: false).prepare(try root.subdirectory("faulty"))
        let healthy = try await FaultScenario.transaction(.rollback, encrypted: false).prepare(try root.subdirectory("healthy"))
        let fullDisk = FaultKind(name: "ENOSPC", operation: .write, code: ResultCode.SQLITE_FULL.rawValue, persistent: true)
        let (faultyResult, _) = await FaultInjection.inject(fullDisk, at: 0, under: root.path + "/faulty/") {
            try await faulty.run()
        }
        #expect(!faultyResult.isSuccess)
        let (healthyResult, injected) = await FaultInjection.inject(fullDisk, at: 0, under: root.path + "/faulty/") {
            try await healthy.run()
        }
        faulty.close()
        healthy.close()
        #expect(healthyResult.isSuccess)
        #expect(injected == 0)
        #expect(try healthy.check(true) == .acknowledged)
        #expect(try faulty.check(false) == .acknowledged)
    }

    @Test(arguments: scenarios)
    func everyFaultAtEveryCallIndexLosesNothing(_ scenario: FaultScenario) async throws {
        try FaultInjection.checkInstalled()
        let root = try TemporaryDirectory()
        var statistics = FaultStatistics(scenario: scenario.description)

        // First, how many calls of each operation the operation makes.
        let countDirectory = try root.subdirectory("count")
        let counted = try await scenario.prepare(countDirectory)
        let calls = try await FaultInjection.count(under: countDirectory + "/") { try await counted.run() }
        counted.close()
        #expect(try counted.check(true) == .acknowledged, "\(scenario): the operation without faults")

        var iteration = 0
        for kind in FaultKind.all where !scenario.excludedKinds.contains(kind.name) {
            for index in 0..<calls[kind.operation, default: 0] {
                iteration += 1
                let directory = try root.subdirectory("\(iteration)")
                let operation = try await scenario.prepare(directory)
                let (result, injected) = await FaultInjection.inject(kind, at: index, under: directory + "/") {
                    try await operation.run()
                }
                operation.close()
                let label = "\(scenario), \(kind) at call \(index)"
                statistics.record(kind, injected: injected)
                if case .failure(let error) = result {
                    statistics.recordError(error, kind: kind, path: operation.path, name: operation.databaseName, label: label)
                }
                // An encrypted file as the fault left it: a page that
                // CipherDatabase.verify rejects now, but that the WAL holds
                // intact (the checks below pass) is a false alarm of verify.
                let key = operation.key()
                let verifiedAsLeft = key.flatMap { verifyAsLeft(operation.path, key: $0) }
                if let problem = integrityProblem(operation.path, key: key) {
                    statistics.corrupt.append("\(label): \(problem)")
                } else {
                    do {
                        switch try operation.check(result.isSuccess) {
                        case .acknowledged: break
                        case .failedButDurable: statistics.failedButDurable.append(label)
                        case .lostAcknowledged(let detail): statistics.lost.append("\(label): \(detail)")
                        case .inconsistent(let detail): statistics.inconsistent.append("\(label): \(detail)")
                        }
                    } catch {
                        statistics.unreadable.append("\(label): \(error)")
                    }
                    if let verifiedAsLeft {
                        statistics.verifyFalseAlarms.append("\(label): \(verifiedAsLeft)")
                    }
                }
                try? FileManager.default.removeItem(atPath: directory)
            }
        }
        print(statistics.summary)
        #expect(statistics.lost.isEmpty, "acknowledged writes lost: \(statistics.lost)")
        #expect(statistics.corrupt.isEmpty, "corrupt files: \(statistics.corrupt)")
        #expect(statistics.inconsistent.isEmpty, "inconsistent states: \(statistics.inconsistent)")
        #expect(statistics.unreadable.isEmpty, "databases that don't open after the fault: \(statistics.unreadable)")
        #expect(statistics.untypedErrors.isEmpty, "untyped errors: \(statistics.untypedErrors)")
        if scenario.namesTheDatabase {
            #expect(statistics.unnamed.isEmpty, "errors that do not name the database: \(statistics.unnamed)")
        }
        #expect(statistics.mislabeled.isEmpty, "full disks reported as another error: \(statistics.mislabeled.prefix(5))")
        #expect(statistics.failedButDurable.isEmpty, "failed operations whose transaction is in the database: \(statistics.failedButDurable)")
        #expect(statistics.injected.values.reduce(0, +) > 0)
        // Found here, fixed in GRDBCipher: verify skips main-file pages that
        // committed WAL frames supersede (a checkpoint torn by a full disk
        // leaves such pages), instead of reporting them as tampered.
        #expect(statistics.verifyFalseAlarms.isEmpty, "verify false alarms: \(statistics.verifyFalseAlarms.prefix(3))")
    }
}

extension Result {
    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}
