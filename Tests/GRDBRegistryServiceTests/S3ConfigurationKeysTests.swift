import Foundation
import GRDBRegistryConfiguration
import GRDBReplicaStore
import Testing
import TestSupport

/// The `replication.s3` keys of the configuration: an S3-compatible
/// store's region, endpoint and credentials file, winning over the
/// standard variables; a credentials file others can read, a malformed
/// endpoint, a key the section doesn't know or settings for a store that
/// isn't S3 refused at loading, naming the key.
@Suite struct S3ConfigurationKeysTests {
    /// A credentials file in AWS's shared format with `profile`'s keys.
    static func credentialsFile(in directory: TemporaryDirectory, profile: String, keyID: String, secret: String, mode: mode_t = 0o600) throws -> String {
        let path = directory.path("s3.credentials")
        try Data("""
            [default]
            aws_access_key_id = default-key
            aws_secret_access_key = default-secret
            [\(profile)]
            aws_access_key_id = \(keyID)
            aws_secret_access_key = \(secret)
            """.utf8).write(to: URL(fileURLWithPath: path))
        #expect(chmod(path, mode) == 0)
        return path
    }

    static func configuration(_ s3: String, replica: String = "s3://replicas/registry", directory: TemporaryDirectory, environment: [String: String]) throws -> RegistryConfiguration {
        try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants"},
             "replication": {"replica": "\#(replica)", "s3": \#(s3)}}
            """#.utf8), baseDirectory: directory.url, environment: environment)
    }

    @Test func theConfigurationsS3KeysWinOverTheStandardVariables() throws {
        let directory = try TemporaryDirectory()
        let file = try Self.credentialsFile(in: directory, profile: "registry", keyID: "file-key", secret: "file-secret")
        let environment = [
            "AWS_REGION": "eu-west-3", "AWS_ENDPOINT_URL": "http://10.0.0.1:9000", "AWS_ACCESS_KEY_ID": "env-key",
            "AWS_SECRET_ACCESS_KEY": "env-secret", "AWS_SESSION_TOKEN": "env-token", "AWS_PROFILE": "other",
        ]
        let configuration = try Self.configuration(
            #"{"region": "us-east-1", "endpoint": "http://127.0.0.1:9000", "credentialsFile": "s3.credentials", "profile": "registry"}"#,
            directory: directory, environment: environment)
        let replication = try #require(configuration.replication)
        #expect(replication.s3Region == "us-east-1")
        #expect(replication.s3Endpoint == URL(string: "http://127.0.0.1:9000"))
        #expect(replication.s3CredentialsFile == file)
        #expect(replication.s3Profile == "registry")
        // What this library's client and Litestream's are given.
        let settings = try S3Settings.fromEnvironment(replication.s3Environment(environment))
        #expect(settings.region == "us-east-1")
        #expect(settings.endpoint == URL(string: "http://127.0.0.1:9000"))
        #expect(settings.credentials.accessKeyID == "file-key")
        #expect(settings.credentials.secretAccessKey == "file-secret")
        #expect(settings.credentials.sessionToken == nil)
        #expect(try replication.replicaURL(forTenant: "acme")
            == "s3://replicas/registry/tenants/acme?endpoint=http%3A%2F%2F127.0.0.1%3A9000&force-path-style=true&region=us-east-1")

        // Without the keys, the standard variables still decide.
        let bare = try Self.configuration("{}", directory: directory, environment: environment)
        let fromVariables = try S3Settings.fromEnvironment(try #require(bare.replication).s3Environment(environment))
        #expect(fromVariables.region == "eu-west-3")
        #expect(fromVariables.credentials.accessKeyID == "env-key")
    }

    @Test func aCredentialsFileOthersCanReadIsRefusedAtLoadingAndLeftAsItIs() throws {
        let directory = try TemporaryDirectory()
        let file = try Self.credentialsFile(in: directory, profile: "default", keyID: "k", secret: "s", mode: 0o644)
        let before = try Data(contentsOf: URL(fileURLWithPath: file))
        #expect {
            _ = try Self.configuration(#"{"region": "us-east-1", "credentialsFile": "s3.credentials"}"#, directory: directory, environment: [:])
        } throws: { error in
            let text = "\(error)"
            return text.contains("replication.s3.credentialsFile") && text.contains("chmod 600")
        }
        var status = stat()
        #expect(stat(file, &status) == 0 && status.st_mode & 0o777 == 0o644)
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == before)
    }

    @Test(arguments: [
        (#"{"region": "us-east-1", "endpoint": "http://127.0.0.1:9000/bucket"}"#, "s3://replicas", "replication.s3.endpoint"),
        (#"{"region": "us-east-1", "credentialsFile": "missing.credentials"}"#, "s3://replicas", "replication.s3.credentialsFile"),
        (#"{"region": "us-east-1", "secretAccessKey": "x"}"#, "s3://replicas", "secretAccessKey"),
        (#"{"region": ""}"#, "s3://replicas", "replication.s3.region"),
        (#"{"region": "us-east-1"}"#, "file:///srv/replica", "replication.s3"),
    ])
    func badS3SettingsAreRefusedAtLoadingNamingTheKey(s3: String, replica: String, key: String) throws {
        let directory = try TemporaryDirectory()
        #expect {
            _ = try Self.configuration(s3, replica: replica, directory: directory, environment: ["AWS_REGION": "us-east-1"])
        } throws: { error in
            "\(error)".contains(key)
        }
    }

    @Test func anS3ConfigurationIsWrittenAndLoadsBackTheSame() throws {
        let directory = try TemporaryDirectory()
        _ = try Self.credentialsFile(in: directory, profile: "registry", keyID: "k", secret: "s")
        let configuration = try Self.configuration(
            #"{"region": "us-east-1", "endpoint": "http://127.0.0.1:9000", "credentialsFile": "s3.credentials", "profile": "registry"}"#,
            directory: directory, environment: [:])
        let data = try configuration.fileContents(relativeTo: directory.url)
        #expect(!String(decoding: data, as: UTF8.self).contains("\"k\""), "a key was written")
        #expect(try RegistryConfiguration.parse(data, baseDirectory: directory.url, environment: [:]) == configuration)
    }
}
