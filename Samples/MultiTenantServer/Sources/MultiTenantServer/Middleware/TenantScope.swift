import GRDBRegistry

/// The tenant whose request is running, set by ``TenantMiddleware`` for the
/// rest of the request (a task-local, so it reaches every task the handler
/// awaits). ``ServerRequestContext/requireTenant()`` checks it: tenant data
/// reached outside its tenant's scope is a programming error, answered 500,
/// never served.
enum TenantScope {
    @TaskLocal static var current: TenantID?
}
