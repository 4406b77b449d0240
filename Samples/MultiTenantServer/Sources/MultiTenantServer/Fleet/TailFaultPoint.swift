import Foundation
import GRDBRegistry
import Logging

/// The fault point of `scripts/fleet-chaos`'s `appendkill` scenario, off
/// unless `MTS_FAULT_KILL_BEFORE_TAIL_APPEND` names a file (relative to
/// the data folder): once that file exists, the next durable write this
/// node records in the fleet's durable tail kills the process with
/// SIGKILL after its transaction committed here and before its change
/// reaches the tail (`DatabaseService.Hooks.beforeTailAppend`). The write
/// is never answered; the campaign checks that no acknowledged write is
/// lost and that the tenant's next owner restores it without a gap.
///
/// ```swift
/// var hooks = recordedEncryption.hooks
/// hooks.beforeTailAppend = TailFaultPoint(environment: environment, data: data, logger: logger)?.hook
/// ```
struct TailFaultPoint: Sendable {
    /// The variable that turns the fault point on.
    static let variable = ServerVariable.tailFaultPoint.rawValue

    /// The file whose existence arms it.
    let trigger: String
    let logger: Logger

    /// Nil unless ``variable`` is set.
    init?(environment: [String: String], data: URL, logger: Logger) {
        guard let name = environment[Self.variable], !name.isEmpty else { return nil }
        trigger = name.hasPrefix("/") ? name : data.appendingPathComponent(name).path
        self.logger = logger
        logger.warning("fault point armed by a file: a durable write dies between its commit and its append once it exists", metadata: [
            "variable": "\(Self.variable)", "file": "\(trigger)"])
    }

    /// The hook: one `stat` per durable write while the variable is set.
    var hook: @Sendable (TenantID, UInt64) -> Void {
        { [trigger, logger] id, sequence in
            guard FileManager.default.fileExists(atPath: trigger) else { return }
            logger.critical("fault point: killed between the commit and the tail's append", metadata: [
                "tenant": "\(id)", "sequence": "\(sequence)"])
            kill(getpid(), SIGKILL)
        }
    }
}
