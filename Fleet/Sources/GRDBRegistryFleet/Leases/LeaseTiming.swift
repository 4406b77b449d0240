/// The arithmetic of leases and fencing (see ``FleetConfiguration``'s
/// timing assumptions): one place decides when a node's writes stop.
struct LeaseTiming: Sendable, Equatable {
    let lease: Duration
    let renewInterval: Duration
    /// The worst round trip to PostgreSQL measured at start.
    let roundTrip: Duration

    /// Refuses timings that leave no room for fencing.
    ///
    /// - throws: ``FleetError/timing(reason:)``.
    init(lease: Duration, renewInterval: Duration, roundTrip: Duration) throws(FleetError) {
        guard lease > .zero, renewInterval > .zero else {
            throw .timing(reason: "lease (\(lease)) and renew interval (\(renewInterval)) must be positive")
        }
        guard renewInterval * 3 <= lease else {
            throw .timing(reason: "the lease (\(lease)) must be at least 3 renew intervals (\(renewInterval) each), so that a late renewal or two still keeps it")
        }
        guard roundTrip * 8 <= lease else {
            throw .timing(reason: "PostgreSQL's round trip (\(roundTrip)) is more than 1/8 of the lease (\(lease)): lengthen the lease, or bring PostgreSQL closer")
        }
        self.lease = lease
        self.renewInterval = renewInterval
        self.roundTrip = roundTrip
    }

    /// What the fence gives up at the end of each lease: a quarter of it
    /// (which covers a 1% drift between the node's monotonic clock and
    /// PostgreSQL's many times over), or twice the round trip if larger.
    var margin: Duration {
        max(lease / 4, roundTrip * 2)
    }

    /// The fence's deadline after a renewal sent at `sent` succeeded.
    /// PostgreSQL computed `lease_until` as its `now()` when it ran the
    /// renewal, after `sent`: this deadline comes `margin` before it.
    func fenceDeadline(renewalSent sent: ContinuousClock.Instant) -> ContinuousClock.Instant {
        sent + lease - margin
    }

    /// The longest a statement may take in the loop: a renewal slower than
    /// this is worth nothing to the fence anyway.
    var statementTimeout: Duration {
        lease - margin
    }
}
