import Foundation
import GRDBRegistry
import Logging

extension DatabaseService {
    /// Drains every configured database and every open tenant at once,
    /// then checkpoints and closes each of them.
    ///
    /// - parameter drainTimeout: How long queued writes may run before they
    ///   are interrupted; zero refuses and interrupts at once (cancellation,
    ///   failed start).
    func shutdown(drainTimeout: Duration?) async {
        let (databases, tenants) = state.withLock { state in
            // A failed start keeps its phase: waiters get its error.
            if state.phase != .failed { state.phase = .draining }
            return (Array(state.databases.values), state.tenants)
        }
        // Waiters of a start that never finished (a failed start failed
        // them already: the first failure wins).
        readiness.fail(DatabaseServiceError.notRunning(phase: "draining"))
        logger.info("database service draining", metadata: ["drainTimeout": "\(drainTimeout.map { "\($0)" } ?? "none")"])

        await withTaskGroup(of: Void.self) { group in
            for open in databases {
                group.addTask { await self.drainAndClose(open.database, drainTimeout: drainTimeout) }
            }
            if let tenants {
                group.addTask {
                    await tenants.close(drainTimeout)
                    self.logger.info("tenants closed")
                }
            }
        }
        ownership.changeTail?.stop()
        state.withLock { state in
            if state.phase != .failed { state.phase = .stopped }
        }
        observer(.openDatabasesChanged(0))
        logger.info("database service stopped")
    }

    private func drainAndClose(_ database: ManagedDatabase, drainTimeout: Duration?) async {
        var logger = self.logger
        logger[metadataKey: "database"] = "\(database.name)"
        if drainTimeout != .zero {
            // Tell apart a drain that ended on its own from one that hit the
            // timeout, for the log.
            let start = ContinuousClock.now
            await database.drain(timeout: drainTimeout)
            if let drainTimeout, ContinuousClock.now - start >= drainTimeout {
                logger.warning("in-flight writes outlived the shutdown timeout: interrupted and rolled back")
            }
        } else {
            await database.drain(timeout: .zero)
        }
        // Checkpoint and close are blocking SQLite I/O: off the cooperative pool.
        let closeLogger = logger
        await BlockingWork.run {
            do {
                try database.close()
                closeLogger.info("database closed")
            } catch {
                closeLogger.error("database close failed", metadata: ["error": "\(error)"])
            }
        }
    }
}
