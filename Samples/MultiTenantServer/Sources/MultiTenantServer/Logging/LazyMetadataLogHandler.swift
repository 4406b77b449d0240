import Logging

/// swift-log's `StreamLogHandler`, with metadata formatted when a message
/// is logged rather than when metadata is set.
///
/// `StreamLogHandler` formats its metadata on every change, and Hummingbird
/// sets a request id on the logger of every request: on the leaderboard
/// route, that formatting cost about 4 % of the server's CPU (perf, release
/// build), on top of the formatting of the lines written (one per request
/// at this server's `info` level, RequestLogMiddleware). This handler keeps
/// the metadata as given, and hands it to a `StreamLogHandler` only for
/// the lines it writes, so the output is swift-log's own.
///
/// ```swift
/// var logger = Logger(label: "MultiTenantServer") { LazyMetadataLogHandler(label: $0) }
/// logger.logLevel = .info
/// ```
struct LazyMetadataLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String, metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider) {
        self.label = label
        self.metadataProvider = metadataProvider
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var stream = StreamLogHandler.standardError(label: label, metadataProvider: metadataProvider)
        stream.logLevel = logLevel
        stream.metadata = metadata
        stream.log(event: event)
    }
}
