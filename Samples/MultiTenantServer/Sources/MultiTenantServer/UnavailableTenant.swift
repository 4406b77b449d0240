import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import Hummingbird

// A tenant whose database can't be opened (a damaged or foreign file, a
// full disk, a failing migration, a key that doesn't fit) answers
// 503 Service Unavailable, with a JSON body that names the tenant and an
// error id, `{"error":{"message":"Tenant acme is unavailable: …","id":"…"}}`
// (RequestLogMiddleware): the server is fine, that one database needs its
// operator, who finds the problem in the log by that id. The detail (SQL,
// paths, migration text) never goes to the client. The other
// tenants keep answering; nothing is written to the damaged file. (Without
// these conformances, Hummingbird would answer an opaque 500.)

extension RepositoryOperationError: @retroactive HTTPResponseError {
    /// 503 for storage problems (a damaged file, a full disk, an I/O
    /// error, a lock); 500 for what is a bug of the server (a constraint
    /// that the repository should have checked).
    public var status: HTTPResponse.Status {
        switch resultCode {
        case .SQLITE_CORRUPT, .SQLITE_NOTADB, .SQLITE_FULL, .SQLITE_IOERR, .SQLITE_BUSY, .SQLITE_LOCKED,
             .SQLITE_CANTOPEN, .SQLITE_READONLY, .SQLITE_PERM, .SQLITE_NOMEM:
            return .serviceUnavailable
        default:
            return .internalServerError
        }
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        try HTTPError(status, message: "\(database) is unavailable: the server log names the problem.").response(from: request, context: context)
    }
}

extension MigrationError: @retroactive HTTPResponseError {
    /// Migrations run when a tenant opens: the tenant is unavailable until
    /// its operator fixes the file, the storage or the migration set.
    public var status: HTTPResponse.Status { .serviceUnavailable }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        try HTTPError(status, message: "The tenant database is unavailable: the server log names the problem.").response(from: request, context: context)
    }
}

extension CipherError: @retroactive HTTPResponseError {
    /// An encrypted tenant whose file doesn't open (damaged pages, a key
    /// that doesn't fit, a foreign header) is unavailable like a damaged
    /// plain one; its path stays in the server's log, not in the response.
    public var status: HTTPResponse.Status { .serviceUnavailable }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        try HTTPError(status, message: "The tenant database is unavailable: its encrypted file does not open (damaged, or another key). The server log names it.")
            .response(from: request, context: context)
    }
}

extension TenantEncryptionError: @retroactive HTTPResponseError {
    /// A tenant file that the tenant-key policy or the catalog's record
    /// refuses (a plain file in place of an encrypted tenant's) was
    /// neither opened nor written: the tenant is unavailable until its
    /// operator puts the right file back. What is wrong, and where, is in
    /// the server's log only.
    public var status: HTTPResponse.Status { .serviceUnavailable }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        try HTTPError(status, message: "The tenant database is unavailable: the server log names the problem.").response(from: request, context: context)
    }
}
