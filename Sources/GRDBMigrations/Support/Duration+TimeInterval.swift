import Foundation

extension Duration {
    /// The duration in seconds, as GRDB's `Configuration.busyMode` takes it.
    package var timeInterval: TimeInterval {
        TimeInterval(components.seconds) + TimeInterval(components.attoseconds) / 1e18
    }
}
