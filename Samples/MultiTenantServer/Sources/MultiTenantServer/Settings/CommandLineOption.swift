/// An option of the server's command line, as the help describes it: the
/// parsers switch over the cases of the enums that conform
/// (``ServerOption``, ``FleetOption``), so an option the help leaves out
/// can't be parsed, and one the parser doesn't handle doesn't compile.
protocol CommandLineOption: CaseIterable, RawRepresentable, Sendable where RawValue == String {
    /// The placeholder of its value in the help (`PORT`), nil for a flag.
    var valueName: String? { get }
    /// The environment variable that gives its default, if any.
    var variable: String? { get }
    /// What it does, for people, with its default.
    var summary: String { get }
}

extension CommandLineOption {
    /// `--port PORT`, or the flag alone.
    var synopsis: String { valueName.map { "\(rawValue) \($0)" } ?? rawValue }
}
