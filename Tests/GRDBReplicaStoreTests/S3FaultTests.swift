import Foundation
import GRDBReplicaStore
import Logging
import Testing
import TestSupport

/// The S3 backend behind scripts/s3-fault-proxy.py, in front of moto:
/// passing failures are retried, damaged answers are errors, a store that
/// stays down is reported within the retry bound.
@Suite(.serialized) struct S3FaultTests {
    static let quickRetries = S3Settings.RetryPolicy(maxAttempts: 4, baseDelay: 0.05, maxDelay: 0.2, requestTimeout: 5)

    static func backend(_ moto: MotoServer, _ proxy: S3FaultProxy, retry: S3Settings.RetryPolicy = quickRetries) throws -> S3ReplicaStoreBackend {
        let settings = S3Settings(
            region: moto.region, endpoint: proxy.endpoint,
            credentials: S3Credentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey),
            retry: retry, pageSize: 2)
        return try S3ReplicaStoreBackend(location: S3Location(parsing: "s3://replicas/registry"), settings: settings, logger: Logger(label: "test"))
    }

    @Test func retriesRecoverFromAFewSlowDownsAnd500s() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let proxy = try await onOwnThread { [endpoint = moto.endpoint] in try S3FaultProxy(upstream: endpoint) }
        defer { proxy.stop() }
        let backend = try Self.backend(moto, proxy)

        try await proxy.inject("slowdown", count: 3)
        try await backend.put("tenants/acme/snapshot", data: Data("snapshot".utf8))
        #expect(try await proxy.requestCount() == 4)

        try await proxy.inject("status500", count: 2)
        #expect(try await backend.get("tenants/acme/snapshot") == Data("snapshot".utf8))
        #expect(try await proxy.requestCount() == 7)

        try await proxy.inject("refuse", count: 2)
        #expect(try await backend.list(prefix: "tenants/").map(\.key) == ["tenants/acme/snapshot"])
    }

    @Test func aTruncatedBodyIsCorruptAndNeverReturned() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let proxy = try await onOwnThread { [endpoint = moto.endpoint] in try S3FaultProxy(upstream: endpoint) }
        defer { proxy.stop() }
        let backend = try Self.backend(moto, proxy)
        try await backend.put("tenants/acme/snapshot", data: Data(repeating: 42, count: 10_000))

        try await proxy.inject("truncate-get")
        await #expect {
            try await backend.get("tenants/acme/snapshot")
        } throws: { error in
            guard case ReplicaStoreError.corrupt(let key, let reason) = error else { return false }
            return key == "tenants/acme/snapshot" && reason.contains("SHA-256")
        }
        let directory = try TemporaryDirectory()
        let target = directory.path("restored")
        await #expect(throws: ReplicaStoreError.self) { try await backend.get("tenants/acme/snapshot", toFile: target) }
        #expect(directory.files.isEmpty)

        try await proxy.inject("pass")
        #expect(try await backend.get("tenants/acme/snapshot") == Data(repeating: 42, count: 10_000))
    }

    /// A page that says "truncated" without a token is an error, never the
    /// first page as the whole listing.
    @Test func aCutListingIsAnError() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let proxy = try await onOwnThread { [endpoint = moto.endpoint] in try S3FaultProxy(upstream: endpoint) }
        defer { proxy.stop() }
        let backend = try Self.backend(moto, proxy)
        for index in 0..<5 {
            try await backend.put("tenants/t\(index)", data: Data([UInt8(index)]))
        }
        #expect(try await backend.list(prefix: "tenants/").count == 5)

        try await proxy.inject("cut-listing", count: 2)
        await #expect {
            try await backend.list(prefix: "tenants/")
        } throws: { error in
            guard case ReplicaStoreError.corrupt(_, let reason) = error else { return false }
            return reason.contains("no continuation token")
        }
    }

    /// A store that refuses every connection, or answers slower than the
    /// request timeout, is `.unavailable` once the attempts are spent, in
    /// about attempts × timeout plus the delays.
    @Test func aStoreThatStaysDownIsUnavailableWithinTheBound() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let proxy = try await onOwnThread { [endpoint = moto.endpoint] in try S3FaultProxy(upstream: endpoint) }
        defer { proxy.stop() }

        let refusing = try Self.backend(moto, proxy, retry: .init(maxAttempts: 3, baseDelay: 0.1, maxDelay: 0.2, requestTimeout: 2))
        try await proxy.inject("refuse")
        var start = Date()
        await #expect {
            try await refusing.put("tenants/acme/x", data: Data("x".utf8))
        } throws: { error in
            guard case ReplicaStoreError.unavailable(let store, let reason) = error else { return false }
            return store == "s3://replicas/registry" && reason.contains("3 attempts")
        }
        // Bounded: three refused connections and two short delays take
        // well under a second alone; the margin is for a loaded machine.
        #expect(Date().timeIntervalSince(start) < 20)
        #expect(try await proxy.requestCount() == 3)

        let slow = try Self.backend(moto, proxy, retry: .init(maxAttempts: 2, baseDelay: 0.1, maxDelay: 0.1, requestTimeout: 1))
        try await proxy.inject("delay", delay: 4)
        start = Date()
        await #expect {
            try await slow.get("tenants/acme/x")
        } throws: { error in
            if case ReplicaStoreError.unavailable = error { return true }
            return false
        }
        let elapsed = Date().timeIntervalSince(start)
        // Two attempts cut at their 1 s timeout; a client that waited for
        // the answers would take 8 s or more (margin for a loaded machine).
        #expect(elapsed >= 2 && elapsed < 7.5)
    }
}
