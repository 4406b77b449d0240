import Foundation

/// What one client or tenant may hold of the server, so that nobody runs
/// it out of file descriptors, memory or disk for everyone else. From the
/// environment (``ServerVariable/limit``); every value has a default:
///
/// | Variable | Default | What |
/// |---|---|---|
/// | `MTS_IDLE_TIMEOUT` | 60 | seconds before an idle connection closes (a partial request included) |
/// | `MTS_SSE_HEARTBEAT` | 15 | seconds between two comment lines on an idle event stream |
/// | `MTS_MAX_CONNECTIONS` | 1024 | open connections (beyond: 429, closed); lowered to fit the limit of open files |
/// | `MTS_MAX_STREAMS` | 512 | event streams in total (beyond: 429) |
/// | `MTS_MAX_STREAMS_PER_TENANT` | 16 | event streams of one tenant (beyond: 429) |
/// | `MTS_MAX_PLAYERS` | 10000 | players of one tenant (beyond: 409) |
/// | `MTS_FREE_SIGNIN_FAILURES` | 5 | failed sign-ins of one address in a minute before each waits (SignInThrottle) |
/// | `MTS_MAX_OPEN_TENANTS` | 256 | tenants kept open at once: the `tenants.maxOpen` a first start writes into registry.json (the file's value is kept afterwards); lowered to fit the limit of open files |
///
/// A stream counts as a connection too. Names are at most
/// ``TenantRequests`` `maxNameLength` characters.
struct ServerLimits: Sendable, Equatable {
    var idleTimeoutSeconds = 60
    var heartbeatSeconds = 15
    var maxConnections = 1024
    var maxStreams = 512
    var maxStreamsPerTenant = 16
    var maxPlayers = 10_000
    var freeSignInFailures = 5
    var maxOpenTenants = 256
    /// What a 429 asks the client to wait, in seconds.
    static let retryAfterSeconds = 5

    /// The limits when the environment sets none.
    static let defaults = ServerLimits()

    private init() { }

    /// The defaults, with each limit its variable sets
    /// (``ServerVariable/limit``).
    init(environment: [String: String]) throws {
        self.init()
        for variable in ServerVariable.allCases {
            guard let limit = variable.limit, let text = environment[variable.rawValue], !text.isEmpty else { continue }
            guard let number = Int(text), number > 0 else {
                throw UsageError(message: "\(variable.rawValue) takes a positive number, not \(text)")
            }
            self[keyPath: limit] = number
        }
    }

    /// These limits, with `maxConnections` (and so `maxStreams`) lowered to
    /// half of what the soft limit of open files leaves: the other half,
    /// and more, goes to the tenants' databases (see
    /// `FileDescriptorBudget`).
    func fitting(softLimit: Int) -> ServerLimits {
        var limits = self
        let connections = max(16, (softLimit - 128) / 2)
        limits.maxConnections = min(maxConnections, connections)
        limits.maxStreams = min(maxStreams, limits.maxConnections)
        return limits
    }

    /// The descriptors to keep for connections (streams included) and the
    /// server's own files.
    var reservedFileDescriptors: Int { maxConnections + 64 }
}
