import Foundation
import GRDBReplicaStore
import Testing
import TestSupport

@Suite struct S3SettingsTests {
    @Test func parsesS3Locations() throws {
        #expect(try S3Location(parsing: "s3://replicas") == S3Location(bucket: "replicas", prefix: ""))
        let location = try S3Location(parsing: "s3://my.replicas-1/registry/prod/")
        #expect(location.bucket == "my.replicas-1")
        #expect(location.prefix == "registry/prod/")
        #expect(location.description == "s3://my.replicas-1/registry/prod")
    }

    @Test(arguments: [
        "file:///srv/replica", "s3://", "s3:///prefix", "s3://Replicas/x", "s3://ab", "s3://-bucket",
        "s3://bucket/a//b", "s3://bucket/a/../b", "s3://key:secret@bucket/x", "s3://bucket:9000/x",
        "s3://bucket/x?region=us-east-1", "s3://bucket/x#y", "s3://under_score",
    ])
    func refusesMalformedLocations(_ text: String) {
        #expect {
            try S3Location(parsing: text)
        } throws: { error in
            guard case ReplicaStoreError.invalidConfiguration(let reason) = error else { return false }
            return !reason.isEmpty
        }
    }

    @Test func readsTheStandardVariables() throws {
        let settings = try S3Settings.fromEnvironment([
            "AWS_ACCESS_KEY_ID": "AKIA1", "AWS_SECRET_ACCESS_KEY": "secret1", "AWS_SESSION_TOKEN": "token1",
            "AWS_DEFAULT_REGION": "eu-west-1", "AWS_REGION": "eu-west-3", "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        ])
        #expect(settings.region == "eu-west-3")
        #expect(settings.endpoint == URL(string: "http://127.0.0.1:9000"))
        #expect(settings.credentials == S3Credentials(accessKeyID: "AKIA1", secretAccessKey: "secret1", sessionToken: "token1"))
        #expect(!settings.credentials.description.contains("secret1"))

        let fallback = try S3Settings.fromEnvironment(["AWS_DEFAULT_REGION": "eu-west-1"], credentials: S3Credentials(accessKeyID: "a", secretAccessKey: "b"))
        #expect(fallback.region == "eu-west-1")
        #expect(fallback.endpoint == nil)
    }

    @Test func refusesMissingOrMalformedVariables() {
        let cases: [[String: String]] = [
            ["AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"], // no region
            ["AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "a"], // no secret
            ["AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", "AWS_ENDPOINT_URL": "ftp://host"],
            ["AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", "AWS_ENDPOINT_URL": "http://host:9000/path"],
        ]
        for environment in cases {
            #expect(throws: ReplicaStoreError.self) { try S3Settings.fromEnvironment(environment) }
        }
    }

    @Test func readsTheSharedCredentialsFile() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("credentials")
        try """
            [default]
            aws_access_key_id = AKIADEFAULT
            aws_secret_access_key = default-secret

            [ci]
            aws_access_key_id=AKIACI
            aws_secret_access_key=ci-secret
            aws_session_token=ci-token
            """.write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o600)
        let settings = try S3Settings.fromEnvironment(["AWS_REGION": "us-east-1", "AWS_SHARED_CREDENTIALS_FILE": path])
        #expect(settings.credentials == S3Credentials(accessKeyID: "AKIADEFAULT", secretAccessKey: "default-secret"))
        let ci = try S3Settings.fromEnvironment(["AWS_REGION": "us-east-1", "AWS_SHARED_CREDENTIALS_FILE": path, "AWS_PROFILE": "ci"])
        #expect(ci.credentials == S3Credentials(accessKeyID: "AKIACI", secretAccessKey: "ci-secret", sessionToken: "ci-token"))
    }

    /// A credentials file its group or others can read is refused before
    /// it is read: the error is about its mode, though it holds no keys.
    @Test func refusesACredentialsFileOthersCanRead() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("credentials")
        try "not an INI file".write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o644)
        #expect {
            try S3Settings.fromEnvironment(["AWS_REGION": "us-east-1", "AWS_SHARED_CREDENTIALS_FILE": path])
        } throws: { error in
            guard case ReplicaStoreError.invalidConfiguration(let reason) = error else { return false }
            return reason.contains("mode 644") && reason.contains("chmod 600")
        }
        chmod(path, 0o600)
        #expect {
            try S3Settings.fromEnvironment(["AWS_REGION": "us-east-1", "AWS_SHARED_CREDENTIALS_FILE": path])
        } throws: { error in
            guard case ReplicaStoreError.invalidConfiguration(let reason) = error else { return false }
            return reason.contains("no aws_access_key_id")
        }
    }
}
