import PostgresNIO

extension Fleet {
    /// Runs `body` with the fleet's PostgreSQL client: the connection pool,
    /// URL, TLS settings and statement deadline of this node's fleet, for
    /// the application's own tables beside the fleet's (a catalog of names
    /// and tokens, say), so that an application has one way to PostgreSQL.
    ///
    /// A connection failure or a deadline passed is
    /// ``FleetError/unreachable(reason:)`` naming the server (never its
    /// password); a server error (a constraint, a trigger) is PostgreSQL's
    /// `PSQLError`, as is.
    ///
    /// ```swift
    /// let count = try await fleet.withPostgres("the count of teams") { client in
    ///     try await client.query("SELECT count(*) FROM teams").collect().first?.decode(Int.self) ?? 0
    /// }
    /// ```
    ///
    /// - parameter what: What `body` does, for the errors.
    /// - throws: ``FleetError/notRunning`` before the node runs.
    public func withPostgres<T: Sendable>(
        _ what: String, _ body: @escaping @Sendable (PostgresClient) async throws -> T
    ) async throws -> T {
        try await store().run(what, body)
    }
}
