import Synchronization

/// The invalid rows a node reported already (``FleetStore/reportInvalidRow(_:)``).
///
/// A row left in PostgreSQL is read again at every refresh, every renew
/// interval: its error line would come back that often for as long as the
/// row stays. Each distinct refusal (its table, key and reason: a row
/// whose content changes is refused for another reason, a new refusal)
/// is logged at `error` once by the node (its process), then at `debug`.
/// `fleet_invalid_rows_total` still counts every read.
final class RefusedRows: Sendable {
    /// The most refusals remembered: past it, the memory starts afresh
    /// (each row then logged once more), so that whoever writes the
    /// tables can't grow a node's memory without bound.
    static let limit = 4096

    private let seen = Mutex<Set<String>>([])

    init() {}

    /// Whether `refusal` was not reported before; remembers it.
    func isNew(_ refusal: String) -> Bool {
        seen.withLock { seen in
            if seen.count >= Self.limit && !seen.contains(refusal) { seen.removeAll() }
            return seen.insert(refusal).inserted
        }
    }
}
