extension DatabaseRegistry {
    /// The registry of the current task.
    ///
    /// Code deep in a daemon resolves its databases from `current`, without
    /// the registry being passed through every call. Set it for a scope with
    /// ``withRegistry(_:isolation:operation:)-(DatabaseRegistry,_,_)``; outside any scope it is an
    /// empty registry, where every database is ``DatabaseContext/notConnected``.
    ///
    /// ```swift
    /// try await withRegistry(registry) {
    ///     let context = DatabaseRegistry.current.databaseContext
    ///     ...
    /// }
    /// ```
    @TaskLocal public static var current = DatabaseRegistry()
}

/// Runs `operation` with `registry` as ``DatabaseRegistry/current``.
///
/// Child tasks created by `operation` inherit the registry.
///
/// ```swift
/// var registry = DatabaseRegistry()
/// registry.databaseContext = .readWrite { dbPool }
/// try await withRegistry(registry) {
///     let query = Query(PlayerCountRequest())   // resolved from the current registry
///     ...
/// }
/// ```
public func withRegistry<R>(
    _ registry: DatabaseRegistry,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws -> R
) async rethrows -> R {
    try await DatabaseRegistry.$current.withValue(registry, operation: operation, isolation: isolation)
}

/// Runs `operation` with ``DatabaseRegistry/current`` modified by `update`.
///
/// Use it to override one database for a scope, a test or a request,
/// leaving the others untouched:
///
/// ```swift
/// try await withRegistry({ $0.players = .readOnly { snapshot } }) {
///     ...
/// }
/// ```
public func withRegistry<R>(
    _ update: (inout DatabaseRegistry) throws -> Void,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws -> R
) async rethrows -> R {
    var registry = DatabaseRegistry.current
    try update(&registry)
    return try await DatabaseRegistry.$current.withValue(registry, operation: operation, isolation: isolation)
}

/// Synchronously runs `operation` with `registry` as ``DatabaseRegistry/current``.
///
/// ```swift
/// try withRegistry(registry) {
///     let count = try DatabaseRegistry.current.databaseContext.reader.read(Player.fetchCount)
/// }
/// ```
public func withRegistry<R>(
    _ registry: DatabaseRegistry,
    operation: () throws -> R
) rethrows -> R {
    try DatabaseRegistry.$current.withValue(registry, operation: operation)
}
