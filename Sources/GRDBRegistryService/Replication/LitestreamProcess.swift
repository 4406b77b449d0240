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
/// writes its configuration (a control socket, no database), starts it,
/// starts it again when it exits, and stops it at shutdown (SIGTERM, then
/// SIGKILL).
///
/// Litestream runs in a session of its own; it ends with a daemon killed
/// with SIGKILL only through its parent-death signal
/// (``LitestreamExecutable``), which a system without `setpriv`, or a
/// replicator started by other means, lacks. An orphan found answering on
/// the socket at start is
/// stopped and replaced, never adopted: what it replicates, and where, is
/// the dead daemon's (in a fleet, tenants at epochs that may no longer be
/// this node's), and two replicators of one database corrupt its replica.
/// A replicator whose parent is a live process of this same executable is
/// another daemon's: start refuses (``ReplicationError/controlSocket(path:reason:)``).
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
    }

    private let executable: LitestreamExecutable
    private let control: LitestreamControl
    private let logger: Logger
    private let state = Mutex(State())
    /// The replicators that a live ``LitestreamProcess`` of this process
    /// started and has not stopped: a second one on their socket is a
    /// configuration error, never an orphan to replace.
    private static let startedHere = Mutex<Set<Int32>>([])

    /// How long ``start()`` waits for the control socket to answer. Long
    /// enough for a machine that is swamped as a daemon starts: 15 s failed
    /// a start in a CI run of the library's tests, where every trivial test
    /// that began at the same moment took 32 s (the whole machine stalled);
    /// a Litestream that exits is reported at once, whatever this says.
    static let startTimeout = Duration.seconds(45)
    /// How long ``stop()`` waits after SIGTERM before SIGKILL: Litestream's
    /// `shutdown-sync-timeout` (30 s) and a margin.
    static let stopTimeout = Duration.seconds(35)

    init(executable: LitestreamExecutable, control: LitestreamControl, logger: Logger) {
        self.executable = executable
        self.control = control
        self.logger = logger
    }

    /// Starts the replicator, after stopping an orphan that answers on the
    /// socket, and returns once its control socket answers.
    ///
    /// - throws: ``ReplicationError``: a live daemon's replicator answers on
    ///   the socket, or a process listens on it without answering as a
    ///   replicator does, Litestream could not start, exited, or its socket did
    ///   not answer within ``startTimeout``.
    func start() async throws(ReplicationError) {
        let control = self.control
        let listener = await BlockingWork.run { Result { try control.listener() } }
        switch listener {
        case .success(nil):
            break
        case let .success(orphan?):
            try await replace(orphan: orphan.pid)
        case let .failure(error):
            // Something holds the socket and did not answer as a
            // replicator does: launching would take its path from it.
            throw .controlSocket(path: control.socketPath, reason: "a process listens on it but did not answer as a litestream replicator (\(error)): stop it, or give this daemon its own socket")
        }
        try launch()
        try await waitUntilAnswering()
    }

    /// Stops the replicator `pid` that answers on the socket before this
    /// daemon started one, unless a live daemon runs it: one of this
    /// process, or another process of this executable.
    private func replace(orphan pid: Int32) async throws(ReplicationError) {
        if Self.startedHere.withLock({ $0.contains(pid) }) {
            throw .controlSocket(path: control.socketPath, reason: "the litestream replicator answering on it (pid \(pid)) belongs to another replicator of this process: give each its own socket and data")
        }
        let parent = Self.parent(of: pid)
        if let parent, parent != 1, parent != getpid(), Self.executable(of: parent) == Self.executable(of: getpid()) {
            throw .controlSocket(path: control.socketPath, reason: "the litestream replicator answering on it (pid \(pid)) belongs to another running daemon (pid \(parent)): give each daemon its own socket and data")
        }
        logger.warning("a litestream replicator left by a daemon that ended answers on the socket: stopping it, to start this daemon's own", metadata: [
            "socket": "\(control.socketPath)", "pid": "\(pid)"])
        kill(pid, SIGTERM)
        if await !Self.waitUntilGone(pid, deadline: ContinuousClock.now + Self.stopTimeout) {
            logger.warning("the left replicator did not stop after SIGTERM: killing it", metadata: ["pid": "\(pid)"])
            kill(pid, SIGKILL)
            _ = await Self.waitUntilGone(pid, deadline: nil)
        }
    }

    /// Waits until process `pid` is gone (``parent(of:)`` is nil), or
    /// `deadline` passes; returns whether it is gone.
    private static func waitUntilGone(_ pid: Int32, deadline: ContinuousClock.Instant?) async -> Bool {
        while parent(of: pid) != nil {
            if let deadline, ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    /// The parent of process `pid`, or nil when it is gone (or a zombie,
    /// which is gone but for its exit status).
    static func parent(of pid: Int32) -> Int32? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // pid (comm) state ppid …: comm may hold spaces and parentheses.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 1, fields[0] != "Z" else { return nil }
        return Int32(fields[1])
    }

    private static func executable(of pid: Int32) -> String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")
    }

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
            Self.startedHere.withLock { _ = $0.remove(process.processIdentifier) }
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

    /// Stops the process it started: SIGTERM, Litestream's last
    /// sync (its `shutdown-sync-timeout` is 30 s), then SIGKILL if still
    /// alive after ``stopTimeout``.
    func stop() async {
        guard let process = state.withLock({ $0.process }) else { return }
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
        Self.startedHere.withLock { _ = $0.remove(process.processIdentifier) }
        logger.info("litestream replicator stopped")
    }

    // MARK: - Launch

    /// The configuration of the replicator process: a control socket,
    /// quiet logs, level-0 retention checked every
    /// `Replication.litestreamL0RetentionCheckInterval` (each check lists
    /// every database's replica, idle ones included). Databases come
    /// through the socket.
    var configuration: String {
        """
        l0-retention: 5m
        l0-retention-check-interval: \(Int(RegistryConfiguration.Replication.litestreamL0RetentionCheckInterval.components.seconds))s
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
        Self.startedHere.withLock { _ = $0.insert(process.processIdentifier) }
        logger.info("litestream replicator started", metadata: ["pid": "\(process.processIdentifier)"])
    }
}
