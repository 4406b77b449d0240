import Foundation
import PostgresNIO

/// A `postgres://user[:password]@host[:port]/database` URL, parsed once,
/// with the form that errors and logs show (no password).
struct PostgresURL: Sendable, CustomStringConvertible {
    var host: String
    var port: Int
    var username: String
    var password: String?
    var database: String?

    init(_ string: String) throws(FleetError) {
        guard let components = URLComponents(string: string),
              let scheme = components.scheme, scheme == "postgres" || scheme == "postgresql"
        else {
            throw .invalidConfiguration("the PostgreSQL URL must look like postgres://user[:password]@host[:port]/database, not \(Self.redact(string))")
        }
        guard let host = components.host, !host.isEmpty else {
            throw .invalidConfiguration("the PostgreSQL URL \(Self.redact(string)) names no host")
        }
        guard let user = components.user, !user.isEmpty else {
            throw .invalidConfiguration("the PostgreSQL URL \(Self.redact(string)) names no user")
        }
        if components.query != nil {
            // sslmode and friends: refused rather than silently ignored.
            throw .invalidConfiguration("the PostgreSQL URL \(Self.redact(string)) has query parameters, which this build does not read")
        }
        self.host = host
        self.port = components.port ?? 5432
        // URLComponents' `user` and `password` are decoded already: a
        // second decoding would turn a password's "%41" into "A".
        self.username = user
        self.password = components.password
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        self.database = path.isEmpty ? nil : path
    }

    /// The URL without its password.
    var description: String {
        "postgres://\(username)@\(host):\(port)/\(database ?? "")"
    }

    /// `string` with any password replaced, for errors about a URL that did not parse.
    static func redact(_ string: String) -> String {
        guard var components = URLComponents(string: string) else { return "(unparsable URL)" }
        if components.password != nil { components.password = "***" }
        return components.string ?? "(unparsable URL)"
    }

    /// The client configuration. TLS is off: the fleet's PostgreSQL is
    /// reached on a private network (loopback in the tests).
    func clientConfiguration(connectTimeout: Duration) -> PostgresClient.Configuration {
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: .disable)
        configuration.options.connectTimeout = connectTimeout
        configuration.options.maximumConnections = 8
        return configuration
    }
}
