/// The options of a single server (fleet mode adds ``FleetOption``).
/// ``ServerSettings`` parses them; `--help` lists them
/// (``ServerHelp``).
enum ServerOption: String, CommandLineOption {
    case host = "--host"
    case port = "--port"
    case data = "--data"
    case tlsCertificate = "--tls-cert"
    case tlsKey = "--tls-key"
    case behindTLSProxy = "--behind-tls-proxy"
    case help = "--help"

    /// The option an argument names: its long form, or `-h` for `--help`.
    init?(argument: String) {
        if argument == "-h" { self = .help } else { self.init(rawValue: argument) }
    }

    var valueName: String? {
        switch self {
        case .host: "HOST"
        case .port: "PORT"
        case .data: "DIRECTORY"
        case .tlsCertificate, .tlsKey: "PEM"
        case .behindTLSProxy, .help: nil
        }
    }

    var variable: String? {
        switch self {
        case .port: "PORT"
        case .data: "MTS_DATA"
        case .tlsCertificate: "MTS_TLS_CERT"
        case .tlsKey: "MTS_TLS_KEY"
        case .host, .behindTLSProxy, .help: nil
        }
    }

    var summary: String {
        switch self {
        case .host: "the address to listen on (default 127.0.0.1); off loopback, TLS or --behind-tls-proxy is required"
        case .port: "the port to listen on (default 8080; 0 picks a free one, printed at start)"
        case .data: "the data directory: registry.json, catalog, tenants, secrets (default ./data)"
        case .tlsCertificate: "serve HTTPS with this PEM certificate chain (with --tls-key)"
        case .tlsKey: "the PEM private key of --tls-cert"
        case .behindTLSProxy: "a reverse proxy on this host terminates TLS: allow plain HTTP off loopback"
        case .help: "print this help and exit (also -h)"
        }
    }

    /// Whether `arguments` ask for the help, read as the parser reads
    /// them (the value of an option is never taken for `--help`): the
    /// help answers before anything else is checked, so that it shows
    /// even when the environment holds a value the server would refuse.
    static func asksForHelp(_ arguments: [String]) -> Bool {
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            if let option = ServerOption(argument: argument) {
                if option == .help { return true }
                if option.valueName != nil { _ = iterator.next() }
            } else if let option = FleetOption(rawValue: argument), option.valueName != nil {
                _ = iterator.next()
            }
        }
        return false
    }
}
