import GRDB

/// A queryable that fetches a single value, and does not observe changes.
///
/// ```swift
/// struct ReportRequest: FetchQueryable {
///     static var defaultValue: Report { .empty }
///
///     func fetch(_ db: Database) throws -> Report {
///         try Report.fetch(db)
///     }
/// }
///
/// for try await report in ReportRequest().values(in: context) {
///     print(report)   // exactly once
/// }
/// ```
public protocol FetchQueryable: Queryable where Values == QueryableValues<Value> {
    /// Options for the fetch. Only ``QueryableOptions/async`` and
    /// ``QueryableOptions/assertNoFailure`` apply. Default: ``QueryableOptions/default``.
    static var queryableOptions: QueryableOptions { get }

    /// Fetches the value.
    func fetch(_ db: Database) throws -> Value
}

extension FetchQueryable {
    public static var queryableOptions: QueryableOptions { .default }
}

extension FetchQueryable where Context: TopLevelDatabaseReader {
    /// Returns a sequence of one value, fetched from the database of `context`.
    public func values(in context: Context) -> QueryableValues<Value> {
        QueryableValues.fetching(
            Result { try context.reader },
            options: Self.queryableOptions,
            requestType: Self.self,
            fetch: { db in try self.fetch(db) })
    }
}
