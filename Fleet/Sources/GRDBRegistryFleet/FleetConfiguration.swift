import Foundation

/// How a node joins a fleet: where the shared PostgreSQL is, who the node
/// is, and the timing of its leases.
///
/// ```swift
/// let configuration = FleetConfiguration(
///     postgres: "postgres://fleet@db.internal:5432/fleet",
///     nodeID: "n1",
///     address: "http://10.0.0.11:8080",
///     secret: try FleetSecret(Data(String(repeating: "s", count: 32).utf8)))
/// // lease 2 s, renewed every 0.5 s, tenants restored as soon as claimed
/// ```
///
/// ## Timing assumptions
///
/// A node's lease ends at PostgreSQL's `now() + lease`, computed by
/// PostgreSQL when it runs the renewal. The node fences its own writes at
/// `sent + lease - margin`, where `sent` is the instant of its monotonic
/// clock at which it sent that renewal, and `margin` is the larger of
/// `lease / 4` and twice the round trip measured at start. PostgreSQL runs
/// the renewal after it was sent, so the node stops committing before any
/// other node can see its lease expired, provided the node's monotonic
/// clock runs within 1% of PostgreSQL's (no wall-clock synchronisation is
/// needed: expiry is only ever compared with PostgreSQL's `now()`, fencing
/// only with the node's monotonic clock). ``Fleet/run()`` refuses timings
/// that leave no room: `renewInterval * 3 > lease`, or a round trip longer
/// than `lease / 8` (``FleetError/timing(reason:)``).
public struct FleetConfiguration: Sendable {
    /// `postgres://user[:password]@host[:port]/database`, with libpq's
    /// `sslmode` (`disable`, `require`, `verify-ca`, `verify-full`) and
    /// `sslrootcert=PATH` (the CA's PEM file; default: the system's trust
    /// store) as query parameters. Without `sslmode`, a loopback host is
    /// reached in plain text and any other with `verify-full`;
    /// `sslmode=disable` off loopback, `allow`, `prefer` and any other
    /// parameter are refused (``FleetError/invalidConfiguration(_:)``).
    /// For example
    /// `postgres://fleet@db.internal/fleet?sslmode=verify-full&sslrootcert=/etc/fleet/pg-ca.pem`.
    public var postgres: String
    /// This node's identifier: 1 to 63 characters among `a-z`, `0-9`, `-`.
    public var nodeID: String
    /// `http(s)://host:port`, where peers forward this node's tenants' requests.
    public var address: String
    /// The secret every node holds and PostgreSQL does not: this node signs
    /// its row with it, and refuses every node row that it does not sign.
    public var secret: FleetSecret
    /// How long a renewal keeps the node's lease (PostgreSQL's clock).
    public var lease: Duration
    /// How often the node renews, refreshes its view and claims orphans.
    public var renewInterval: Duration
    /// When a claimed tenant is restored.
    public var restore: RestoreTiming

    /// - parameter renewInterval: `lease / 4` when nil.
    public init(
        postgres: String,
        nodeID: String,
        address: String,
        secret: FleetSecret,
        lease: Duration = .seconds(2),
        renewInterval: Duration? = nil,
        restore: RestoreTiming = .eager
    ) {
        self.postgres = postgres
        self.nodeID = nodeID
        self.address = address
        self.secret = secret
        self.lease = lease
        self.renewInterval = renewInterval ?? lease / 4
        self.restore = restore
    }

    /// Whether `id` is a valid node identifier.
    static func isValidNodeID(_ id: String) -> Bool {
        guard (1...63).contains(id.unicodeScalars.count) else { return false }
        return id.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }
    }

    /// Whether `host` names this machine: `localhost`, 127.0.0.0/8 or
    /// `::1` (bracketed or not). The one loopback check of the fleet and
    /// of the servers built on it: traffic to such a host never leaves the
    /// machine, so it may go without TLS; anything else (`0.0.0.0`,
    /// `::ffff:127.0.0.1`, `127.1`, a name that resolves to loopback) is
    /// treated as off the machine.
    ///
    /// ```swift
    /// FleetConfiguration.isLoopback("127.0.0.1")  // true
    /// FleetConfiguration.isLoopback("10.0.0.11")  // false
    /// ```
    public static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// Whether `address` is a node's base URL: `http(s)://host[:port]`,
    /// nothing else (the forwarder appends the request's path to it, so a
    /// path, query or user would steer where requests go).
    static func isValidAddress(_ address: String) -> Bool {
        guard let url = URLComponents(string: address), url.scheme == "http" || url.scheme == "https",
              url.host?.isEmpty == false, url.user == nil, url.password == nil,
              url.path.isEmpty, url.query == nil, url.fragment == nil
        else { return false }
        return true
    }
}

/// When a node restores a tenant it claimed from a lapsed node.
public enum RestoreTiming: Sendable, Equatable {
    /// Right after the claim, in the background: the first request finds
    /// it ready (the default).
    case eager
    /// On the first request that needs it (one restore per tenant, however
    /// many requests wait for it).
    case onFirstRequest
}
