import Instrumentation
import Logging
import OTel
import ServiceLifecycle
import Tracing

/// The server's traces: off unless the standard OpenTelemetry variables ask
/// for them, then exported over OTLP/HTTP (swift-otel).
///
/// Tracing is on when `OTEL_EXPORTER_OTLP_ENDPOINT`,
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_TRACES_EXPORTER` is set
/// (and `OTEL_TRACES_EXPORTER` is not `none`, `OTEL_SDK_DISABLED` not
/// `true`). swift-otel reads the other `OTEL_*` variables itself
/// (`OTEL_SERVICE_NAME`, `OTEL_BSP_SCHEDULE_DELAY`, headers, sampler...).
/// The service name defaults to `MultiTenantServer`.
///
/// When on, the tracer is bootstrapped as the process's tracer, which an
/// executable does once: ``RequestTracingMiddleware`` (one span per
/// request, from the W3C `traceparent` it receives, named after its route
/// and without its query) and AsyncHTTPClient
/// (one client span per request forwarded to a tenant's owner in fleet
/// mode, whose `traceparent` it
/// injects) find it there. The library gets the same tracer explicitly
/// (`DatabaseService(tracer:)`): its spans hang under each request's.
struct ServerTracing {
    /// The tracer to hand the library: a `NoOpTracer` when off.
    var tracer: any Tracer
    /// The exporter's background work (batching, export, flush at
    /// shutdown), to run in the service group; nil when off.
    var service: (any Service)?

    /// `services`, after the exporter when tracing is on: a service
    /// group stops its services in reverse order, so the exporter stops
    /// last and flushes the spans of the others' shutdown.
    func exporterFirst(_ services: [any Service]) -> [any Service] {
        guard let service else { return services }
        return [service] + services
    }

    static func isRequested(by environment: [String: String]) -> Bool {
        if environment[ServerVariable.sdkDisabled.rawValue]?.lowercased() == "true" { return false }
        if let exporter = environment[ServerVariable.tracesExporter.rawValue] { return exporter.lowercased() != "none" }
        return environment[ServerVariable.otlpEndpoint.rawValue] != nil || environment[ServerVariable.otlpTracesEndpoint.rawValue] != nil
    }

    /// Starts tracing when the environment asks for it, else returns the
    /// no-op tracer; the process's tracer stays unbootstrapped.
    ///
    /// - throws: swift-otel's configuration error (an unknown exporter or
    ///   protocol in the variables, for example): the server does not start.
    static func start(environment: [String: String], logger: Logger) throws -> ServerTracing {
        guard isRequested(by: environment) else { return ServerTracing(tracer: NoOpTracer(), service: nil) }
        var configuration = OTel.Configuration.default
        configuration.serviceName = "MultiTenantServer"
        configuration.diagnosticLogger = .custom(logger)
        // Traces only: the metrics stay on /metrics (Prometheus), the
        // logs on the standard error.
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        // The environment overrides these (OTEL_SERVICE_NAME, ...).
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        InstrumentationSystem.bootstrap(backend.factory)
        logger.info("tracing on: spans exported over OTLP")
        return ServerTracing(tracer: backend.factory, service: backend.service)
    }
}
