import Foundation
import GRDBReplicaStore
import Logging
import Testing
import TestSupport

/// The S3 backend against a real S3-compatible server (moto) that checks
/// signatures.
@Suite(.serialized) struct S3ReplicaStoreBackendTests {
    static func backend(
        _ moto: MotoServer, endpoint: URL? = nil, location: String = "s3://replicas/registry",
        secret: String? = nil, retry: S3Settings.RetryPolicy = S3Settings.RetryPolicy(maxAttempts: 3, baseDelay: 0.05, maxDelay: 0.2, requestTimeout: 10),
        pageSize: Int = 1000
    ) throws -> S3ReplicaStoreBackend {
        let settings = S3Settings(
            region: moto.region, endpoint: endpoint ?? moto.endpoint,
            credentials: S3Credentials(accessKeyID: moto.accessKeyID, secretAccessKey: secret ?? moto.secretAccessKey),
            retry: retry, pageSize: pageSize)
        return try S3ReplicaStoreBackend(location: S3Location(parsing: location), settings: settings, logger: Logger(label: "test"))
    }

    @Test func putGetListAndDeleteRoundTrip() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let backend = try Self.backend(moto)
        let bytes = Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try await backend.put("tenants/acme/snapshot 1.db", data: bytes)
        try await backend.put("tenants/acme/wal/0001", data: Data("wal".utf8))
        try await backend.put("tenants/bravo/ünïcode+key=$1", data: Data())
        #expect(try await backend.get("tenants/acme/snapshot 1.db") == bytes)
        #expect(try await backend.get("tenants/bravo/ünïcode+key=$1") == Data())

        let directory = try TemporaryDirectory()
        try await backend.get("tenants/acme/wal/0001", toFile: directory.path("wal"))
        #expect(FileManager.default.contents(atPath: directory.path("wal")) == Data("wal".utf8))
        // A file over several read pieces (1 MiB each), streamed.
        let source = directory.path("source")
        let fileBytes = Data((0..<(3 << 20) + 17).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) })
        try fileBytes.write(to: URL(fileURLWithPath: source))
        try await backend.put("tenants/charlie/file", fromFile: source)
        #expect(try await backend.get("tenants/charlie/file") == fileBytes)

        #expect(try await backend.list(prefix: "tenants/acme/") == [
            ReplicaObject(key: "tenants/acme/snapshot 1.db", size: 70_000),
            ReplicaObject(key: "tenants/acme/wal/0001", size: 3),
        ])
        #expect(try await backend.list(prefix: "").map(\.key).count == 4)

        try await backend.delete("tenants/acme/wal/0001")
        try await backend.delete("tenants/acme/wal/0001") // deleting a missing object succeeds
        await #expect(throws: ReplicaStoreError.notFound(key: "tenants/acme/wal/0001")) {
            try await backend.get("tenants/acme/wal/0001")
        }
        #expect(try await backend.list(prefix: "tenants/acme/").map(\.key) == ["tenants/acme/snapshot 1.db"])
        // Another prefix of the same bucket is another store.
        #expect(try await Self.backend(moto, location: "s3://replicas/other").list(prefix: "").isEmpty)
    }

    /// A listing crosses pages through continuation tokens: 1,001 keys in
    /// pages of 100 (S3 answers at most 1,000 per page).
    @Test func listsEveryPageOfALongListing() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let backend = try Self.backend(moto, pageSize: 100)
        let keys = (0..<1001).map { String(format: "tenants/t%04d", $0) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for chunk in stride(from: 0, to: keys.count, by: 125) {
                group.addTask {
                    for key in keys[chunk..<min(chunk + 125, keys.count)] {
                        try await backend.put(key, data: Data(key.utf8))
                    }
                }
            }
            try await group.waitForAll()
        }
        let listed = try await backend.list(prefix: "tenants/")
        #expect(listed.map(\.key) == keys)
        #expect(listed.allSatisfy { $0.size == 13 })
    }

    /// moto checks signatures: a wrong secret is refused with S3's code.
    @Test func aWrongSecretIsRefused() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let backend = try Self.backend(moto, secret: "not-the-secret")
        do {
            try await backend.put("tenants/acme/x", data: Data("x".utf8))
            Issue.record("a request signed with a wrong secret was accepted")
        } catch let ReplicaStoreError.refused(key, status, code, _) {
            #expect(key == "tenants/acme/x")
            #expect(status == 403)
            #expect(code == "SignatureDoesNotMatch")
        }
        #expect(try await Self.backend(moto).list(prefix: "").isEmpty)
    }

    @Test func aMissingBucketIsRefusedNotEmpty() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let backend = try Self.backend(moto, location: "s3://no-such-bucket")
        await #expect(throws: ReplicaStoreError.refused(key: "", status: 404, code: "NoSuchBucket", message: "The specified bucket does not exist")) {
            try await backend.list(prefix: "")
        }
        await #expect(throws: ReplicaStoreError.refused(key: "a", status: 404, code: "NoSuchBucket", message: "The specified bucket does not exist")) {
            try await backend.get("a")
        }
    }

    @Test func refusesKeysThatNameNoObject() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let backend = try Self.backend(moto)
        for key in ["", "/tenants/a", "tenants//a", "tenants/../a", "./a", "a/\u{7}"] {
            await #expect(throws: ReplicaStoreError.self) { try await backend.put(key, data: Data()) }
        }
        #expect(try await backend.list(prefix: "").isEmpty)
    }

    /// A server-side copy: the same bytes under the new key (read back
    /// checked: the checksum came with them), the source kept, an existing
    /// destination replaced whole, and keys that need encoding in the
    /// signed `x-amz-copy-source` header copied too.
    @Test func aCopyHasTheSourcesExactBytesUnderTheNewKeyAndKeepsTheSource() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let backend = try Self.backend(moto)
        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 9) })
        let source = "tenants/acme/ltx/0/0000000000000001-0000000000000004.ltx"
        let destination = "removed/tenants/acme/20270115T080000.250Z/ltx/0/0000000000000001-0000000000000004.ltx"
        try await backend.put(source, data: bytes)
        try await backend.copy(source, to: destination)
        #expect(try await backend.get(destination) == bytes)
        #expect(try await backend.get(source) == bytes)
        #expect(try await backend.list(prefix: "").map(\.key) == [destination, source])

        try await backend.put("tenants/acme/other", data: Data("other".utf8))
        try await backend.copy("tenants/acme/other", to: destination)
        #expect(try await backend.get(destination) == Data("other".utf8))

        let odd = "tenants/ünï cøde/a+b=$1&x"
        try await backend.put(odd, data: Data("odd".utf8))
        try await backend.copy(odd, to: "removed/" + odd)
        #expect(try await backend.get("removed/" + odd) == Data("odd".utf8))
    }

    @Test func copyingAMissingObjectIsNotFoundAndCreatesNothing() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let backend = try Self.backend(moto)
        await #expect(throws: ReplicaStoreError.notFound(key: "tenants/acme/missing")) {
            try await backend.copy("tenants/acme/missing", to: "removed/tenants/acme/missing")
        }
        #expect(try await backend.list(prefix: "").isEmpty)
        await #expect(throws: ReplicaStoreError.self) { try await backend.copy("tenants/../a", to: "b") }
        await #expect(throws: ReplicaStoreError.self) { try await backend.copy("a", to: "/b") }
    }

    /// S3 may answer a CopyObject 200 with an error document: that is a
    /// failure (retried for a passing code, then reported), never a copy.
    @Test func aCopyAnsweredTwoHundredWithAnErrorDocumentFails() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let upstream = moto.endpoint
        let proxy = try await onOwnThread { try S3FaultProxy(upstream: upstream) }
        defer { proxy.stop() }
        let backend = try Self.backend(moto, endpoint: proxy.endpoint)
        try await backend.put("tenants/acme/a", data: Data("a".utf8))
        try await proxy.inject("copy-error")
        let error = await #expect(throws: ReplicaStoreError.self) { try await backend.copy("tenants/acme/a", to: "removed/a") }
        guard case .unavailable(_, let reason) = error else {
            Issue.record("expected unavailable, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("InternalError") && reason.contains("removed/a"), "\(reason)")
        // Every other request passes.
        #expect(try await backend.get("tenants/acme/a") == Data("a".utf8))
        // Once (two answers: the retry succeeds).
        try await proxy.inject("copy-error", count: 1)
        try await backend.copy("tenants/acme/a", to: "removed/a")
        #expect(try await backend.get("removed/a") == Data("a".utf8))
    }

}
