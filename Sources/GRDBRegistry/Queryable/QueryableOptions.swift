/// Options for ``ValueObservationQueryable``,
/// ``PresenceObservationQueryable`` and ``FetchQueryable``.
///
/// ```swift
/// struct SlowReportRequest: FetchQueryable {
///     static let queryableOptions = QueryableOptions.async
///     ...
/// }
/// ```
public struct QueryableOptions: OptionSet, Sendable {
    public let rawValue: Int

    public init(rawValue: Int) {
        self.rawValue = rawValue
    }

    /// By default the initial value is fetched synchronously, as soon as
    /// the values are subscribed to, so that a consumer never sees a stale
    /// default value. With `async`, it is fetched asynchronously, off the
    /// subscribing thread.
    public static let async = QueryableOptions(rawValue: 1 << 0)

    /// The observed database region is constant: the observation uses
    /// GRDB's `ValueObservation.trackingConstantRegion(_:)`, which enables
    /// scheduling optimizations. Read its documentation before using this
    /// option: a fetch whose tables depend on fetched values must not use it.
    public static let constantRegion = QueryableOptions(rawValue: 1 << 1)

    /// By default a database error ends the sequence of values with that
    /// error (and ``Query/error`` exposes it). With `assertNoFailure`, a
    /// database error is a fatal error.
    public static let assertNoFailure = QueryableOptions(rawValue: 1 << 2)

    /// The default options: an immediate initial value, a region tracked
    /// on each fetch, errors reported.
    public static let `default`: QueryableOptions = []
}
