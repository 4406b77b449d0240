import GRDB

/// A queryable that observes the database with GRDB's `ValueObservation`.
///
/// ```swift
/// struct PlayersRequest: ValueObservationQueryable {
///     static var defaultValue: [Player] { [] }
///     var minimumScore: Int
///
///     func fetch(_ db: Database) throws -> [Player] {
///         try Player.filter(Column("score") >= minimumScore).fetchAll(db)
///     }
/// }
///
/// let players = Query(PlayersRequest(minimumScore: 100), in: \.players)
/// ```
///
/// The first value is fetched as soon as the values are subscribed to
/// (unless ``QueryableOptions/async``), then a new value is notified
/// after each committed transaction that changes the fetched region.
/// When `Value` is `Equatable`, a value equal to the previous one is not
/// notified, whatever the context (GRDB's `removeDuplicates()` would miss
/// the repeats of a ``ReadOnlyDatabaseReader``, which fetches each value
/// afresh). This also hides the initial value that a `DatabasePool`
/// notifies twice on SQLite builds without `SQLITE_ENABLE_SNAPSHOT` (the
/// system SQLite on Linux).
///
/// Equal requests on one database share one observation: see
/// ``SharedObservations``.
public protocol ValueObservationQueryable: Queryable where Values == QueryableValues<Value> {
    /// Options for the database observation. Default: ``QueryableOptions/default``.
    static var queryableOptions: QueryableOptions { get }

    /// Fetches the observed value.
    func fetch(_ db: Database) throws -> Value
}

extension ValueObservationQueryable {
    public static var queryableOptions: QueryableOptions { .default }

    /// The GRDB observation of ``fetch(_:)``, with the options of the type.
    var observation: ValueObservation<ValueReducers.Fetch<Value>> {
        Self.queryableOptions.contains(.constantRegion)
            ? ValueObservation.trackingConstantRegion { db in try self.fetch(db) }
            : ValueObservation.tracking { db in try self.fetch(db) }
    }
}

extension ValueObservationQueryable where Context: TopLevelDatabaseReader {
    /// Returns the values observed in the database of `context`.
    public func values(in context: Context) -> QueryableValues<Value> {
        QueryableValues.observing(
            observation, of: self, in: context, options: Self.queryableOptions,
            makeTransform: { { $0 } })
    }
}

extension ValueObservationQueryable where Context: TopLevelDatabaseReader, Value: Equatable {
    /// Returns the distinct values observed in the database of `context`.
    public func values(in context: Context) -> QueryableValues<Value> {
        QueryableValues.observing(
            observation, of: self, in: context, options: Self.queryableOptions, isDuplicate: { $0 == $1 },
            makeTransform: { { $0 } })
    }
}
