import Foundation

/// What `MultiTenantServer --help` prints: every option
/// (``ServerOption``, ``FleetOption``) and every environment variable
/// (theirs, and ``ServerVariable``), from the tables the parsers read.
enum ServerHelp {
    static var text: String {
        var lines = [
            "usage: MultiTenantServer [options]",
            "",
            "A multi-tenant game server: one SQLite database per tenant, a catalog, live leaderboards.",
            "Options override their environment variable (in parentheses).",
            "",
            "Options:",
        ]
        lines += ServerOption.allCases.map(line)
        lines += ["", "Fleet mode (--fleet; also needs MTS_OPERATOR_TOKEN, MTS_MASTER_KEY and the fleet secret, the same on every node):"]
        lines += FleetOption.allCases.map(line)
        lines += ["", "Environment:"]
        let defaults = ServerLimits.defaults
        lines += ServerVariable.allCases.map { variable in
            let value = variable.limit.map { " (default \(defaults[keyPath: $0]))" } ?? ""
            return "  \(column(variable.rawValue)) \(variable.summary)\(value)"
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func line(_ option: some CommandLineOption) -> String {
        let variable = option.variable.map { " (\($0))" } ?? ""
        return "  \(column(option.synopsis)) \(option.summary)\(variable)"
    }

    /// `name` in a column of 36 characters, or on a line of its own when
    /// longer (never cut).
    private static func column(_ name: String) -> String {
        let width = 36
        guard name.count < width else { return name + "\n" + String(repeating: " ", count: width + 2) }
        return name.padding(toLength: width, withPad: " ", startingAt: 0)
    }
}
