import Foundation
import GRDBRegistryFleet
@testable import MultiTenantServer
import Testing

/// Fleet mode's settings: single-server mode stays the default, and each
/// incomplete or unsafe fleet setting is refused with what to give.
@Suite struct FleetSettingsTests {
    static let shared = [
        "MTS_OPERATOR_TOKEN": String(repeating: "o", count: 40), "MTS_MASTER_KEY": String(repeating: "ab", count: 32),
        "MTS_FLEET_SECRET": String(repeating: "f", count: 32),
    ]
    static let secret: FleetSecret = {
        do { return try FleetSecret(Data(String(repeating: "f", count: 32).utf8)) } catch { fatalError("\(error)") }
    }()

    func settings(_ arguments: [String], _ environment: [String: String] = FleetSettingsTests.shared) throws -> ServerSettings {
        try ServerSettings(arguments: arguments, environment: environment)
    }

    func refusal(_ arguments: [String], _ environment: [String: String] = FleetSettingsTests.shared) -> String {
        do {
            _ = try settings(arguments, environment)
            return "accepted"
        } catch let error as UsageError {
            return error.message
        } catch {
            return "\(error)"
        }
    }

    static let complete = ["--fleet", "postgres://fleet@127.0.0.1:5432/fleet", "--node-id", "n1", "--replica-store", "/srv/replica", "--port", "8081"]

    @Test func noFleetOptionIsSingleServerMode() throws {
        #expect(try settings([], [:]).fleet == nil)
    }

    @Test func aCompleteFleetNodeGetsItsDefaults() throws {
        let fleet = try #require(try settings(Self.complete).fleet)
        #expect(fleet == FleetMode(
            postgres: "postgres://fleet@127.0.0.1:5432/fleet", nodeID: "n1", advertise: "http://127.0.0.1:8081", secret: Self.secret,
            replicaStore: "/srv/replica", acknowledgements: .asynchronous, lease: .seconds(2), restore: .eager,
            encryptedBackupInterval: .seconds(5), litestream: "litestream"))
    }

    @Test func theEnvironmentGivesDefaultsThatArgumentsOverride() throws {
        let environment = Self.shared.merging([
            "MTS_FLEET": "postgres://fleet@db:5432/fleet", "MTS_NODE_ID": "n2", "MTS_REPLICA_STORE": "/srv/r",
            "MTS_ACKNOWLEDGE": "durable", "MTS_LEASE_SECONDS": "4", "MTS_RESTORE": "on-first-request",
            "MTS_ADVERTISE": "https://10.0.0.2:8080/", "MTS_ENCRYPTED_BACKUP_SECONDS": "1", "MTS_LITESTREAM": "/opt/litestream",
        ]) { $1 }
        let fleet = try #require(try settings(["--node-id", "n3", "--acknowledge", "async"], environment).fleet)
        #expect(fleet.nodeID == "n3")
        #expect(fleet.acknowledgements == .asynchronous)
        #expect(fleet.lease == .seconds(4))
        #expect(fleet.restore == .onFirstRequest)
        #expect(fleet.advertise == "https://10.0.0.2:8080")
        #expect(fleet.encryptedBackupInterval == .seconds(1))
        #expect(fleet.litestream == "/opt/litestream")
    }

    @Test func incompleteOrUnsafeFleetSettingsAreRefused() {
        #expect(refusal(["--node-id", "n1"]).contains("--node-id is a fleet option: give --fleet"))
        #expect(refusal(["--fleet", "mysql://x"]).contains("takes a PostgreSQL URL"))
        #expect(refusal(["--fleet", "postgres://db/fleet", "--replica-store", "/r"]).contains("needs --node-id"))
        #expect(refusal(["--fleet", "postgres://db/fleet", "--node-id", "N1", "--replica-store", "/r"]).contains("--node-id takes 1 to 63 of a-z"))
        #expect(refusal(["--fleet", "postgres://db/fleet", "--node-id", "n1"]).contains("needs --replica-store"))
        #expect(refusal(["--fleet", "postgres://db/fleet", "--node-id", "n1", "--replica-store", "relative"]).contains("absolute path"))
        #expect(refusal(Self.complete, ["MTS_MASTER_KEY": "k"]).contains("needs MTS_OPERATOR_TOKEN"))
        #expect(refusal(Self.complete, ["MTS_OPERATOR_TOKEN": "t"]).contains("needs MTS_MASTER_KEY"))
        #expect(refusal(Self.complete + ["--acknowledge", "sometimes"]).contains("takes async or durable"))
        #expect(refusal(Self.complete + ["--lease-seconds", "0.1"]).contains("from 0.5 to 3600"))
        #expect(refusal(Self.complete + ["--restore", "lazy"]).contains("takes eager or on-first-request"))
        #expect(refusal(Self.complete + ["--encrypted-backup-seconds", "0"]).contains("1 or more"))
        #expect(refusal(Self.complete + ["--advertise", "http://10.0.0.1:8080/api"]).contains("--advertise takes the base URL"))
        #expect(refusal(Self.complete + ["--advertise", "10.0.0.1:8080"]).contains("--advertise takes the base URL"))
        #expect(refusal(Self.complete + ["--port", "0"]).contains("--port 0 picks a port the other nodes"))
        #expect(refusal(Self.complete + ["--port", "0", "--advertise", "http://127.0.0.1:9000"]) == "accepted")
        // Tokens travel to the advertised address: plain HTTP on loopback only.
        #expect(refusal(Self.complete + ["--advertise", "http://10.0.0.1:8080"]).contains("is plain HTTP to 10.0.0.1, which is not a loopback address"))
        #expect(refusal(Self.complete + ["--advertise", "https://10.0.0.1:8080"]) == "accepted")
        #expect(refusal(Self.complete + ["--advertise", "https://10.0.0.1:8080", "--fleet-ca-file", "/nonexistent/ca.pem"]).contains("--fleet-ca-file /nonexistent/ca.pem cannot be read"))
    }

    /// `--replica-store s3://bucket/prefix` is a bucket every node reaches
    /// with the standard `AWS_*` variables; a store they don't make usable
    /// is refused at start, naming what is missing.
    @Test func anS3ReplicaStoreIsTakenWithItsSettingsFromTheEnvironment() throws {
        let s3 = Self.shared.merging([
            "AWS_ACCESS_KEY_ID": "key", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        ]) { $1 }
        let arguments = ["--fleet", "postgres://fleet@127.0.0.1:5432/fleet", "--node-id", "n1", "--port", "8081", "--replica-store"]
        let fleet = try #require(try settings(arguments + ["s3://replicas/fleet//"], s3).fleet)
        #expect(fleet.replicaStore == "s3://replicas/fleet")
        #expect(fleet.replica == "s3://replicas/fleet")
        #expect(try #require(try settings(Self.complete).fleet).replica == "file:///srv/replica")
        #expect(refusal(arguments + ["s3://replicas/fleet"]).contains("--replica-store s3://replicas/fleet:"))
        var noRegion = s3
        noRegion["AWS_REGION"] = nil
        #expect(refusal(arguments + ["s3://replicas/fleet"], noRegion).contains("AWS_REGION"))
        var noKey = s3
        noKey["AWS_SECRET_ACCESS_KEY"] = nil
        #expect(refusal(arguments + ["s3://replicas/fleet"], noKey).contains("AWS_SECRET_ACCESS_KEY"))
        #expect(refusal(arguments + ["s3://replicas/a/../b"], s3).contains("--replica-store s3://replicas/a/../b:"))
        #expect(refusal(arguments + ["gs://replicas/fleet"], s3).contains("absolute path"))
    }

    /// A password in `--fleet` is refused, without repeating it: every
    /// local user reads a process's command line (security review 3, F7).
    /// It comes from MTS_FLEET's URL, a password file of mode 0600
    /// (refused when group or others may read it), or PGPASSWORD.
    @Test func aPasswordOnTheCommandLineIsRefusedAndComesFromTheEnvironmentOrAFile() throws {
        let others = ["--node-id", "n1", "--replica-store", "/srv/replica", "--port", "8081"]
        let refused = refusal(["--fleet", "postgres://fleet:Sesame-42@127.0.0.1:5432/fleet"] + others)
        #expect(refused.contains("--fleet must not carry a password"), "\(refused)")
        #expect(!refused.contains("Sesame"), "\(refused)")
        func password(_ mode: FleetMode?) -> String? {
            mode.flatMap { URLComponents(string: $0.postgres)?.password }
        }

        let inVariable = Self.shared.merging(["MTS_FLEET": "postgres://fleet:Sesame-42@127.0.0.1:5432/fleet"]) { $1 }
        #expect(password(try settings(others, inVariable).fleet) == "Sesame-42")
        let inPGPASSWORD = Self.shared.merging(["PGPASSWORD": "p@ss:w/rd%41"]) { $1 }
        let fromPGPASSWORD = try #require(try settings(Self.complete, inPGPASSWORD).fleet)
        #expect(password(fromPGPASSWORD) == "p@ss:w/rd%41")
        #expect(fromPGPASSWORD.postgres.hasPrefix("postgres://fleet:") && fromPGPASSWORD.postgres.hasSuffix("@127.0.0.1:5432/fleet"), "\(fromPGPASSWORD.postgres)")

        let directory = temporaryTestDirectory()
        try SecretFiles.createDirectory(at: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("postgres.password")
        try SecretFiles.create(at: file, contents: Data("from-the-file\n".utf8))
        // The file wins over PGPASSWORD; its final newline is not part of it.
        #expect(password(try settings(Self.complete + ["--fleet-password-file", file.path], inPGPASSWORD).fleet) == "from-the-file")
        #expect(refusal(others + ["--fleet-password-file", file.path], inVariable).contains("give one of them"))
        #expect(refusal(["--fleet-password-file", file.path]).contains("is a fleet option: give --fleet"))
        #expect(chmod(file.path, 0o644) == 0)
        #expect(refusal(Self.complete + ["--fleet-password-file", file.path]).contains("chmod 600"))
    }

    /// The fleet secret (security review 3, F1): required, 32 bytes or
    /// more, from a file of mode 0600 or MTS_FLEET_SECRET (one of them),
    /// never repeated in a message, and never handed to a child process.
    @Test func theFleetSecretIsRequiredLongEnoughFromAFileOrTheEnvironmentAndKeptFromChildren() throws {
        var without = Self.shared
        without["MTS_FLEET_SECRET"] = nil
        #expect(refusal(Self.complete, without).contains("fleet mode needs the fleet secret"))
        let short = refusal(Self.complete, Self.shared.merging(["MTS_FLEET_SECRET": "Short-Sesame-31-bytes-long-xxxx"]) { $1 })
        #expect(short.contains("MTS_FLEET_SECRET holds 31 bytes: the fleet secret needs 32 or more"), "\(short)")
        #expect(!short.contains("Sesame"))

        let directory = temporaryTestDirectory()
        try SecretFiles.createDirectory(at: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("fleet.secret")
        try SecretFiles.create(at: file, contents: Data((String(repeating: "f", count: 32) + "\n").utf8))
        // The file's final newline is not part of it.
        #expect(try settings(Self.complete + ["--fleet-secret-file", file.path], without).fleet?.secret == Self.secret)
        #expect(try settings(Self.complete, without.merging(["MTS_FLEET_SECRET_FILE": file.path]) { $1 }).fleet?.secret == Self.secret)
        #expect(refusal(Self.complete + ["--fleet-secret-file", file.path]).contains("both give the fleet secret: give one of them"))
        #expect(refusal(["--fleet-secret-file", file.path], without).contains("is a fleet option: give --fleet"))
        #expect(chmod(file.path, 0o640) == 0)
        #expect(refusal(Self.complete + ["--fleet-secret-file", file.path], without).contains("chmod 600"))

        #expect(ServerVariable.childEnvironment(Self.shared)["MTS_FLEET_SECRET"] == nil)
        #expect(ServerHelp.text.contains("--fleet-secret-file FILE") && ServerHelp.text.contains("MTS_FLEET_SECRET"))
    }
}
