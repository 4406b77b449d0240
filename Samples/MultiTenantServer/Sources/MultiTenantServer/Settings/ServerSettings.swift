import Foundation
import GRDBRegistryFleet

/// Command-line settings: the options of ``ServerOption`` and those of
/// fleet mode (``FleetOption``, ``FleetSettings``); `--help` lists them
/// (``ServerHelp``).
/// Port 0 picks a free port; the server prints the one it listens on. The
/// environment gives defaults that arguments override (each option's
/// ``CommandLineOption/variable``). The limits (``ServerLimits``) come
/// from the environment only.
///
/// Off loopback, bearer tokens and plaintext tenants' rows would travel in
/// clear: the server refuses a non-loopback `--host` unless it serves TLS
/// itself (`--tls-cert`, `--tls-key`) or `--behind-tls-proxy` says a
/// reverse proxy on the same host terminates TLS for it.
struct ServerSettings: Sendable {
    var host = "127.0.0.1"
    var port = 8080
    var dataDirectory = "data"
    /// PEM files of the certificate chain and its private key: HTTPS.
    var tlsCertificate: String?
    var tlsKey: String?
    /// A reverse proxy terminates TLS: plain HTTP off loopback is allowed.
    var behindTLSProxy = false
    var limits: ServerLimits
    /// Fleet mode (``FleetSettings``); nil for a single server, the default.
    var fleet: FleetMode?

    init(arguments: [String], environment: [String: String]) throws {
        func variable(_ option: ServerOption) -> String? {
            option.variable.flatMap { environment[$0] }.flatMap { $0.isEmpty ? nil : $0 }
        }
        if let port = variable(.port).flatMap(Int.init) { self.port = port }
        if let data = variable(.data) { dataDirectory = data }
        tlsCertificate = variable(.tlsCertificate)
        tlsKey = variable(.tlsKey)
        limits = try ServerLimits(environment: environment)
        var fleetSettings = try FleetSettings(environment: environment)
        var advertiseGiven = environment[FleetOption.advertise.environmentVariable].map { !$0.isEmpty } ?? false
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            guard let option = ServerOption(argument: argument) else {
                if argument == FleetOption.advertise.rawValue { advertiseGiven = true }
                guard try fleetSettings.parse(argument, &iterator) else {
                    throw UsageError(message: "unknown argument \(argument)")
                }
                continue
            }
            switch option {
            case .host: host = try value(after: argument, &iterator)
            case .port:
                let text = try value(after: argument, &iterator)
                guard let port = Int(text), (0...65535).contains(port) else {
                    throw UsageError(message: "--port takes a number from 0 to 65535, not \(text)")
                }
                self.port = port
            case .data: dataDirectory = try value(after: argument, &iterator)
            case .tlsCertificate: tlsCertificate = try value(after: argument, &iterator)
            case .tlsKey: tlsKey = try value(after: argument, &iterator)
            case .behindTLSProxy: behindTLSProxy = true
            case .help:
                // main answers it before parsing (ServerOption.asksForHelp).
                throw UsageError(message: "\(argument) takes no other argument")
            }
        }
        guard (tlsCertificate == nil) == (tlsKey == nil) else {
            throw UsageError(message: "--tls-cert and --tls-key go together: give both PEM files, or neither")
        }
        if !Self.isLoopback(host) && tlsCertificate == nil && !behindTLSProxy {
            throw UsageError(message: "--host \(host) is not a loopback address, and the server would speak plain HTTP: tokens and tenant data would travel in clear. Give --tls-cert and --tls-key, or --behind-tls-proxy when a reverse proxy terminates TLS for this server")
        }
        if fleetSettings.postgres != nil && port == 0 && !advertiseGiven {
            throw UsageError(message: "--port 0 picks a port the other nodes of the fleet can't know: give --advertise http(s)://host:port, or a port")
        }
        fleet = try fleetSettings.validated(environment: environment, defaultAdvertise: "\(tlsCertificate != nil ? "https" : "http")://\(host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host):\(port)")
    }

    /// Whether the server speaks HTTPS itself.
    var usesTLS: Bool { tlsCertificate != nil }
    var scheme: String { usesTLS ? "https" : "http" }

    /// `localhost`, 127.0.0.0/8 and `::1`: the fleet's check, which
    /// `--advertise` goes through too.
    static func isLoopback(_ host: String) -> Bool {
        FleetConfiguration.isLoopback(host)
    }

    private func value(after option: String, _ iterator: inout IndexingIterator<[String]>) throws -> String {
        guard let value = iterator.next() else { throw UsageError(message: "\(option) needs a value") }
        return value
    }
}

struct UsageError: Error, CustomStringConvertible {
    var message: String
    var description: String { "\(message)\nMultiTenantServer --help lists the options and environment variables." }
}
