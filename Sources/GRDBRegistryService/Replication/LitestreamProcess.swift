import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The `litestream replicate` child of a ``LitestreamReplicator``: it
/// writes its configuration (a control socket, no database), starts it or
/// adopts the one a killed daemon left on the socket, starts it again when
/// it exits, and stops it at shutdown (SIGTERM, then SIGKILL).
///
/// ```swift
/// let process = LitestreamProcess(executable: litestream, control: control, logger: logger)
/// try await process.start()
/// // …
/// await process.stop()
/// ```
///
/// Every call that waits (the socket, the child's exit) runs off the
/// cooperative pool (``BlockingWork``).
///
/// ## Topics
///
/// ### Running the child
///
/// - ``start()``
/// - ``waitUntilAnswering()``
/// - ``restartIfExited(_:)``
/// - ``stop()``
final class LitestreamProcess: Sendable {
    private struct State {
        var process: Process?
        /// A replicator left running by a daemon that was killed, adopted
        /// at start: stopped at shutdown as if started here.
        var adoptedPID: Int32?
    }

    private let executable: LitestreamExecutable
    private let control: LitestreamControl
    private let logger: Logger
    private let state = Mutex(State())

    /// How long ``start()`` waits for the control socket to answer.
    static let startTimeout = Duration.seconds(15)
    /// How long ``stop()`` waits after SIGTERM before SIGKILL: Litestream's
    /// `shutdown-sync-timeout` (30 s) and a margin.
    static let stopTimeout = Duration.seconds(35)

    init(executable: LitestreamExecutable, control: LitestreamControl, logger: Logger) {
        self.executable = executable
        self.control = control
        self.logger = logger
    }

    /// Adopts the replicator that answers on the socket, or starts one, and
    /// returns once its control socket answers.
    ///
    /// - throws: ``ReplicationError``: Litestream could not start, exited,
    ///   or its socket did not answer within ``startTimeout``.
    func start() async throws(ReplicationError) {
        let control = self.control
        // A replicator left by a daemon that was killed (Litestream
        // outlives its parent) still owns the socket: use it.
        if let orphan = await BlockingWork.run({ try? control.info() }) {
            logger.warning("a litestream replicator already answers on the socket: adopting it", metadata: ["socket": "\(control.socketPath)", "pid": "\(orphan.pid)"])
            state.withLock { $0.adoptedPID = orphan.pid }
        } else {
            try launch()
        }
        try await waitUntilAnswering()
    }

    /// Waits until the control socket answers (within ``startTimeout``),
    /// or the child exits.
    func waitUntilAnswering() async throws(ReplicationError) {
        let control = self.control
        let deadline = ContinuousClock.now + Self.startTimeout
        while true {
            let answer = await BlockingWork.run { Result { try control.info() } }
            switch answer {
            case let .success(info):
                logger.info("litestream replicator ready", metadata: ["version": "\(info.version)", "pid": "\(info.pid)"])
                return
            case let .failure(error):
                if let exited = exitStatus() { throw .replicatorExited(status: exited) }
                if ContinuousClock.now > deadline {
                    throw error as? ReplicationError ?? .controlSocket(path: control.socketPath, reason: "\(error)")
                }
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// Starts the child again if it exited (a crash, a kill): Litestream
    /// then knows no database. `exited` is told the exit status first, so
    /// that the caller forgets what it had registered.
    ///
    /// - throws: The ``ReplicationError`` of the new start.
    func restartIfExited(_ exited: (Int32) -> Void) async throws(ReplicationError) {
        let status = state.withLock { state -> Int32? in
            guard let process = state.process, !process.isRunning else { return nil }
            state.process = nil
            return process.terminationStatus
        }
        guard let status else { return }
        exited(status)
        try launch()
        try? await Task.sleep(for: .milliseconds(200))
    }

    /// The exit status of the child, if it exited.
    private func exitStatus() -> Int32? {
        state.withLock { state in
            guard let process = state.process, !process.isRunning else { return nil }
            return process.terminationStatus
        }
    }

    /// Stops the process it started or adopted: SIGTERM, Litestream's last
    /// sync (its `shutdown-sync-timeout` is 30 s), then SIGKILL if still
    /// alive after ``stopTimeout``.
    func stop() async {
        let (adopted, process) = state.withLock { ($0.adoptedPID, $0.process) }
        let control = self.control
        if let adopted {
            kill(adopted, SIGTERM)
            let deadline = ContinuousClock.now + Self.stopTimeout
            while await BlockingWork.run({ (try? control.info()) != nil }) && ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        guard let process else { return }
        if process.isRunning {
            process.terminate()
            let deadline = ContinuousClock.now + Self.stopTimeout
            while process.isRunning && ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(20))
            }
            if process.isRunning {
                logger.warning("litestream did not stop after SIGTERM: killing it")
                kill(process.processIdentifier, SIGKILL)
            }
        }
        logger.info("litestream replicator stopped")
    }

    // MARK: - Launch

    /// The configuration of the replicator process: a control socket,
    /// quiet logs. Databases come through the socket.
    var configuration: String {
        """
        socket:
          enabled: true
          path: \(Self.yamlString(control.socketPath))
          permissions: 0600
        logging:
          level: warn
          stderr: true

        """
    }

    private static func yamlString(_ string: String) -> String {
        let escaped = string.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        return "\"\(escaped)\""
    }

    private func launch() throws(ReplicationError) {
        let configPath = control.socketPath + ".yml"
        do {
            try Data(configuration.utf8).write(to: URL(fileURLWithPath: configPath), options: .atomic)
        } catch {
            throw .controlSocket(path: control.socketPath, reason: "can't write Litestream's configuration \(configPath): \(error)")
        }
        let process = try executable.start(["replicate", "-config", configPath])
        state.withLock { $0.process = process }
        logger.info("litestream replicator started", metadata: ["pid": "\(process.processIdentifier)"])
    }
}
