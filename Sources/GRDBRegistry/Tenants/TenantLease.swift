import GRDB

/// The right to use an open tenant: the tenant is not closed by eviction
/// while a lease on it lives. (Removal with `force`, and the directory's
/// shutdown, close it anyway: then its accesses throw.) Get one from
/// ``TenantDirectory/lease(_:)`` or ``TenantDirectory/leaseBlocking(_:)``.
///
/// Releasing a lease (deallocating it) is bookkeeping only: when it makes
/// a tenant idle beyond the directory's cap, the tenant is closed later,
/// off the releasing thread.
public final class TenantLease<Repository: TenantRepository>: Sendable {
    /// The tenant.
    public let id: TenantID
    /// Its repository.
    public let repository: Repository
    private let onRelease: @Sendable () -> Void

    @usableFromInline
    init(id: TenantID, repository: Repository, onRelease: @escaping @Sendable () -> Void) {
        self.id = id
        self.repository = repository
        self.onRelease = onRelease
    }

    /// A read-only context on the tenant, whose reader holds this lease:
    /// a ``Query`` on it keeps the tenant open for as long as it lives.
    /// Queries of equal requests on one tenant share one observation.
    ///
    /// ```swift
    /// let leaderboard = Query(LeaderboardRequest(), context: lease.context)
    /// ```
    public var context: DatabaseContext {
        do {
            return .readOnly(
                try repository.reader, retaining: self,
                observations: repository.managedDatabase.sharedObservations)
        } catch {
            return .failure(error)
        }
    }

    deinit {
        onRelease()
    }
}
