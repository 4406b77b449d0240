import GRDB
import Synchronization

/// A queryable that observes the presence of a value in the database, and
/// remembers its latest state once it is deleted.
///
/// ```swift
/// struct PlayerPresenceRequest: PresenceObservationQueryable {
///     var playerId: Int64
///
///     func fetch(_ db: Database) throws -> Player? {
///         try Player.fetchOne(db, id: playerId)
///     }
/// }
///
/// for try await presence in PlayerPresenceRequest(playerId: 1).values(in: context) {
///     switch presence {
///     case .missing: print("no player 1")
///     case let .existing(player): print(player.name)
///     case let .gone(player): print("\(player.name) was deleted")
///     }
/// }
/// ```
///
/// Its default value is ``Presence/missing``.
public protocol PresenceObservationQueryable: Queryable
where Value == Presence<WrappedValue>, Values == QueryableValues<Presence<WrappedValue>> {
    /// The type of the observed value.
    associatedtype WrappedValue: Sendable

    /// Options for the database observation. Default: ``QueryableOptions/default``.
    static var queryableOptions: QueryableOptions { get }

    /// Fetches the observed value, or nil if it does not exist.
    func fetch(_ db: Database) throws -> WrappedValue?
}

extension PresenceObservationQueryable {
    public static var defaultValue: Presence<WrappedValue> { .missing }

    public static var queryableOptions: QueryableOptions { .default }
}

extension PresenceObservationQueryable {
    /// The GRDB observation of ``fetch(_:)``, with the options of the type.
    var observation: ValueObservation<ValueReducers.Fetch<WrappedValue?>> {
        Self.queryableOptions.contains(.constantRegion)
            ? ValueObservation.trackingConstantRegion { db in try self.fetch(db) }
            : ValueObservation.tracking { db in try self.fetch(db) }
    }
}

extension PresenceObservationQueryable where Context: TopLevelDatabaseReader {
    /// Returns the presence of the value, observed in the database of `context`.
    public func values(in context: Context) -> QueryableValues<Presence<WrappedValue>> {
        QueryableValues.observing(
            observation, of: self, in: context, options: Self.queryableOptions, pushesEveryValue: true,
            makeTransform: {
                let presence = PresenceScanner<WrappedValue>()
                return { presence.next($0) }
            })
    }
}

extension PresenceObservationQueryable where Context: TopLevelDatabaseReader, WrappedValue: Equatable {
    /// Returns the presence of the value, observed in the database of
    /// `context`, notified only when the value changes.
    public func values(in context: Context) -> QueryableValues<Presence<WrappedValue>> {
        QueryableValues.observing(
            observation, of: self, in: context, options: Self.queryableOptions, isDuplicate: { $0 == $1 }, pushesEveryValue: true,
            makeTransform: {
                let presence = PresenceScanner<WrappedValue>()
                return { presence.next($0) }
            })
    }
}

/// The presence state of one subscription.
final class PresenceScanner<Value: Sendable>: Sendable {
    private let presence = Mutex(Presence<Value>.missing)

    func next(_ value: Value?) -> Presence<Value> {
        presence.withLock { presence in
            presence = presence.next(value)
            return presence
        }
    }
}
