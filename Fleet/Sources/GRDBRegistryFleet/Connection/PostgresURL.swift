import Foundation
import PostgresNIO

/// A `postgres://user[:password]@host[:port]/database[?sslmode=…&sslrootcert=…]`
/// URL, parsed once, with the form that errors and logs show (no password).
///
/// TLS follows libpq's `sslmode` (``TLSMode``), with two differences that
/// keep a token-bearing connection from going out in clear by accident:
/// `disable` is refused off loopback, and without `sslmode` a loopback
/// host means `disable`, any other host `verify-full`. `sslrootcert=PATH`
/// names the PEM file of the CA that signed the server's certificate
/// (default, or `sslrootcert=system`: the system's trust store). Any other
/// query parameter is refused by name, never ignored.
struct PostgresURL: Sendable, CustomStringConvertible {
    /// libpq's `sslmode` values this client honours. `allow` and `prefer`
    /// are refused: both fall back to plain text when the server has no
    /// TLS, which is the downgrade an attacker on the path asks for.
    enum TLSMode: String, Sendable, CaseIterable {
        /// Plain text: loopback hosts only.
        case disable
        /// Encrypted, the server not verified (libpq: unless `sslrootcert`
        /// is given, which makes it `verify-ca`). The fleet logs a warning.
        case require
        /// Encrypted, the server's chain verified, not its name.
        case verifyCA = "verify-ca"
        /// Encrypted, the server's chain and name (or IP address) verified.
        case verifyFull = "verify-full"
    }

    var host: String
    var port: Int
    var username: String
    var password: String?
    var database: String?
    var tlsMode: TLSMode
    /// The CA file of `sslrootcert`; nil for the system's trust store.
    var rootCertificate: String?
    /// The certificates of ``rootCertificate``, loaded at parse time so
    /// that a missing or garbled file stops the start.
    private var trustRoots: [NIOSSLCertificate]?

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
        self.host = host
        self.port = components.port ?? 5432
        // URLComponents' `user` and `password` are decoded already: a
        // second decoding would turn a password's "%41" into "A".
        self.username = user
        self.password = components.password
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        self.database = path.isEmpty ? nil : path

        var mode: String?
        var rootCertificate: String?
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode" where mode == nil: mode = item.value ?? ""
            case "sslrootcert" where rootCertificate == nil: rootCertificate = item.value ?? ""
            case "sslmode", "sslrootcert":
                throw .invalidConfiguration("the PostgreSQL URL \(Self.redact(string)) gives \(item.name) twice")
            default:
                throw .invalidConfiguration("the PostgreSQL URL \(Self.redact(string)) has the parameter \(item.name), which this build does not read (it reads sslmode and sslrootcert)")
            }
        }
        let loopback = FleetConfiguration.isLoopback(host)
        if let mode {
            guard let tlsMode = TLSMode(rawValue: mode) else {
                let accepted = TLSMode.allCases.map(\.rawValue).joined(separator: ", ")
                if mode == "allow" || mode == "prefer" {
                    throw .invalidConfiguration("sslmode=\(mode) falls back to plain text when the server offers no TLS: give one of \(accepted)")
                }
                throw .invalidConfiguration("sslmode=\(mode) is not one of \(accepted)")
            }
            self.tlsMode = tlsMode
        } else {
            self.tlsMode = loopback ? .disable : .verifyFull
        }
        if tlsMode == .disable {
            guard loopback else {
                throw .invalidConfiguration("sslmode=disable would send the PostgreSQL password and the fleet's rows in clear to \(host), which is not a loopback address: give sslmode=verify-full (and sslrootcert=PATH for a private CA)")
            }
            guard rootCertificate == nil else {
                throw .invalidConfiguration("sslrootcert is given with sslmode=disable: there is no certificate to check")
            }
        }
        if let rootCertificate, rootCertificate != "system" {
            guard !rootCertificate.isEmpty else {
                throw .invalidConfiguration("sslrootcert needs the path of a PEM file (or system)")
            }
            let certificates: [NIOSSLCertificate]
            do {
                certificates = try NIOSSLCertificate.fromPEMFile(rootCertificate)
            } catch {
                throw .invalidConfiguration("sslrootcert=\(rootCertificate) cannot be read as PEM certificates: \(error)")
            }
            guard !certificates.isEmpty else {
                throw .invalidConfiguration("sslrootcert=\(rootCertificate) holds no certificate")
            }
            self.rootCertificate = rootCertificate
            self.trustRoots = certificates
        }
    }

    /// The URL without its password.
    var description: String {
        "postgres://\(username)@\(host):\(port)/\(database ?? "")"
    }

    /// Whether the connection is encrypted but nobody checks who answers:
    /// `sslmode=require` without `sslrootcert`, worth a warning at start.
    var isUnverifiedTLS: Bool {
        tlsMode == .require && rootCertificate == nil
    }

    /// `string` with any password replaced, for errors about a URL that did not parse.
    static func redact(_ string: String) -> String {
        guard var components = URLComponents(string: string) else { return "(unparsable URL)" }
        if components.password != nil { components.password = "***" }
        return components.string ?? "(unparsable URL)"
    }

    /// The TLS of the client, from ``tlsMode``: never `prefer`, so a
    /// server without TLS is refused rather than talked to in clear.
    var tls: PostgresClient.Configuration.TLS {
        guard tlsMode != .disable else { return .disable }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if let trustRoots {
            tls.trustRoots = .certificates(trustRoots)
        }
        switch tlsMode {
        case .disable, .verifyFull: tls.certificateVerification = .fullVerification
        // libpq: a root certificate given to `require` makes it verify-ca.
        case .require: tls.certificateVerification = rootCertificate == nil ? .none : .noHostnameVerification
        case .verifyCA: tls.certificateVerification = .noHostnameVerification
        }
        return .require(tls)
    }

    /// The client configuration.
    func clientConfiguration(connectTimeout: Duration) -> PostgresClient.Configuration {
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tls)
        configuration.options.connectTimeout = connectTimeout
        configuration.options.maximumConnections = 8
        return configuration
    }
}
