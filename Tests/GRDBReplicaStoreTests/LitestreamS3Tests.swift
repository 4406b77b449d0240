import Foundation
import GRDBReplicaStore
import Logging
import Testing
import TestSupport

/// The real Litestream 0.5.17 of the venv replicates to, and restores
/// from, moto with the URL and environment S3Settings gives it.
@Suite(.serialized) struct LitestreamS3Tests {
    @Test func litestreamReplicatesAndRestoresThroughTheStoreSettings() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let settings = S3Settings(region: moto.region, endpoint: moto.endpoint,
                                  credentials: S3Credentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey))
        let location = try S3Location(parsing: "s3://replicas/registry")
        let replica = settings.litestreamReplica(location: location, keyPrefix: "tenants/acme")
        #expect(replica.url == "s3://replicas/registry/tenants/acme?endpoint=http%3A%2F%2F127.0.0.1%3A\(moto.endpoint.port ?? 0)&force-path-style=true&region=us-east-1")

        let directory = try TemporaryDirectory()
        let database = directory.path("acme.sqlite")
        let created = try await runChildProcess("/usr/bin/sqlite3", [database, """
            PRAGMA journal_mode=WAL;
            CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200)
            INSERT INTO notes(body) SELECT 'note ' || i FROM n;
            """], mergingOutput: true)
        #expect(created.status == 0, "\(created.stdout)")

        let replicated = try await runChildProcess(litestreamPath, ["replicate", "-once", database, replica.url],
                                             environment: replica.environment, mergingOutput: true)
        #expect(replicated.status == 0, "\(replicated.stdout)")
        let backend = try S3ReplicaStoreBackend(location: location, settings: settings, logger: Logger(label: "test"))
        #expect(try await !backend.list(prefix: "tenants/acme/").isEmpty)

        let restored = directory.path("restored.sqlite")
        let restore = try await runChildProcess(litestreamPath, ["restore", "-o", restored, replica.url],
                                          environment: replica.environment, mergingOutput: true)
        #expect(restore.status == 0, "\(restore.stdout)")
        let query = "SELECT count(*), group_concat(body, ',') FROM notes ORDER BY id;"
        let original = try await runChildProcess("/usr/bin/sqlite3", [database, query]).stdout
        let copy = try await runChildProcess("/usr/bin/sqlite3", [restored, query]).stdout
        #expect(original.hasPrefix("200|note 1,note 2,"))
        #expect(copy == original)
    }

    /// Without an endpoint (AWS itself) the URL carries only the region.
    @Test func awsReplicasCarryOnlyTheRegion() throws {
        let settings = S3Settings(region: "eu-west-3", endpoint: nil, credentials: S3Credentials(accessKeyID: "AKIA1", secretAccessKey: "s"))
        let replica = settings.litestreamReplica(location: try S3Location(parsing: "s3://replicas"), keyPrefix: "tenants/acme/")
        #expect(replica.url == "s3://replicas/tenants/acme?region=eu-west-3")
        #expect(replica.environment["AWS_ACCESS_KEY_ID"] == "AKIA1")
        #expect(replica.environment["AWS_SECRET_ACCESS_KEY"] == "s")
        #expect(replica.environment["AWS_CA_BUNDLE"] == "")
    }
}
