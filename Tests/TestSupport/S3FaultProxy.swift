import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// scripts/s3-fault-proxy.py in front of an S3-compatible server: a
/// loopback endpoint that forwards to it, or injects the fault the test
/// chooses (see the script for the modes).
///
/// ```swift
/// let proxy = try S3FaultProxy(upstream: moto.endpoint)
/// defer { proxy.stop() }
/// try await proxy.inject("slowdown", count: 2)
/// ```
public final class S3FaultProxy {
    /// `http://127.0.0.1:PORT` of the proxy.
    public let endpoint: URL
    private let child: RunningChildProcess
    private var stopped = false

    /// Starts the proxy, forwarding to `upstream`.
    public init(upstream: URL) throws {
        let script = repositoryRoot.appendingPathComponent("scripts/s3-fault-proxy.py").path
        child = try RunningChildProcess(
            executable: venvPython, arguments: ["-u", script, "--upstream", upstream.absoluteString], mergingOutput: true)
        let deadline = Date().addingTimeInterval(20)
        var port: Int?
        while port == nil && Date() < deadline && child.process.isRunning {
            let output = child.stderrSoFar
            if let range = output.range(of: "listening on ") {
                port = Int(output[range.upperBound...].prefix { $0.isNumber })
            } else {
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
        guard let port, let url = URL(string: "http://127.0.0.1:\(port)") else {
            kill(child.process.processIdentifier, SIGKILL)
            throw MotoStartFailure(output: "s3-fault-proxy: " + child.stderrSoFar)
        }
        endpoint = url
    }

    deinit { stop() }

    /// Injects `mode` into the next `count` requests (all of them with -1),
    /// waiting `delay` seconds per request in mode `delay`, after the first
    /// `skip` requests the mode applies to (forwarded unchanged).
    public func inject(_ mode: String, count: Int = -1, delay: Double = 0, skip: Int = 0) async throws {
        var request = URLRequest(url: endpoint.appendingPathComponent("__fault__"))
        request.httpMethod = "POST"
        request.httpBody = try JSONSerialization.data(withJSONObject: ["mode": mode, "count": count, "delay": delay, "skip": skip])
        let (data, response) = try await URLSession.shared.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else {
            throw MotoStartFailure(output: "s3-fault-proxy refused mode \(mode): " + String(decoding: data, as: UTF8.self))
        }
    }

    /// How many requests the proxy has seen (control requests excluded).
    public func requestCount() async throws -> Int {
        let (data, _) = try await URLSession.shared.data(from: endpoint.appendingPathComponent("__fault__"))
        let state = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        return state?["requests"] as? Int ?? -1
    }

    /// How many requests of each kind the proxy has seen (`GET`, `LIST`,
    /// `HEAD`, `PUT`, `DELETE`, `POST`: what an S3 bill counts apart;
    /// control requests excluded).
    public func requestKinds() async throws -> [String: Int] {
        let (data, _) = try await URLSession.shared.data(from: endpoint.appendingPathComponent("__fault__"))
        let state = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        return state?["kinds"] as? [String: Int] ?? [:]
    }

    /// Stops the proxy (SIGKILL, as ``MotoServer/stop()``: it keeps no state).
    public func stop() {
        guard !stopped else { return }
        stopped = true
        kill(child.process.processIdentifier, SIGKILL)
        child.process.waitUntilExit()
    }
}
