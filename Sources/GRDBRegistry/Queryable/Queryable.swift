/// A type that feeds a ``Query`` with a sequence of database values over time.
///
/// Most queryables adopt one of the convenience protocols
/// ``ValueObservationQueryable``, ``PresenceObservationQueryable`` or
/// ``FetchQueryable``. Adopt `Queryable` directly to feed a ``Query`` from
/// any other async sequence.
///
/// ```swift
/// struct PlayerCountRequest: ValueObservationQueryable {
///     static var defaultValue: Int { 0 }
///
///     func fetch(_ db: Database) throws -> Int {
///         try Player.fetchCount(db)
///     }
/// }
///
/// for try await count in PlayerCountRequest().values(in: registry.databaseContext) {
///     print("\(count) players")
/// }
/// ```
///
/// Requests are `Equatable`: a ``Query`` restarts its observation only when
/// its request changes.
public protocol Queryable<Value>: Equatable, Sendable {
    /// The type of the database context the values are read from. A
    /// ``Query`` resolves it from a ``DatabaseRegistry`` key path.
    associatedtype Context = DatabaseContext

    /// The type of the values.
    associatedtype Value: Sendable

    /// The type of the async sequence of values.
    associatedtype Values: AsyncSequence where Values.Element == Value

    /// The value of a ``Query`` before its first value is fetched.
    static var defaultValue: Value { get }

    /// Returns the sequence of values read from `context`.
    func values(in context: Context) -> Values
}
