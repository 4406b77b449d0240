import Foundation
import Testing

/// Review security-2, L4: Litestream, started by `registryctl restore
/// --from-replica` (and by the daemon's replicator, through the same
/// configuration), got the whole environment: the master key and every
/// database key with it. A stand-in `litestream` (a real process: a shell
/// script) writes the environment it got.
@Suite(.serialized) struct RegistryctlChildEnvironmentTests {
    @Test func litestreamGetsTheEnvironmentWithoutTheKeys() async throws {
        let directory = try TemporaryDirectory()
        let seen = directory.path("environment.txt")
        let litestream = directory.path("litestream")
        try Data("#!/bin/sh\nenv > '\(seen)'\nexit 1\n".utf8).write(to: URL(fileURLWithPath: litestream))
        chmod(litestream, 0o700)
        let config = directory.path("registry.json")
        try Data("""
            {
              "databases": {"catalog": {"path": "data/catalog.sqlite"}, "vault": {"path": "data/vault.sqlite", "key": {"env": "VAULT_PASSPHRASE"}}},
              "tenants": {"root": "data/tenants", "masterKey": {"env": "TENANTS_MASTER"}, "allowPlaintextTenants": true},
              "replication": {"replica": "replica", "litestream": "\(litestream)", "socket": "ls.sock", "encryptedBackupDirectory": "kept"}
            }
            """.utf8).write(to: URL(fileURLWithPath: config))
        // acme's replica folder, so that registryctl hands it to Litestream
        // (a tenant with none is refused before Litestream runs).
        try FileManager.default.createDirectory(atPath: directory.path("replica/tenants/acme/ltx"), withIntermediateDirectories: true)
        let environment = [
            "TENANTS_MASTER": String(repeating: "ab", count: 32),
            "VAULT_PASSPHRASE": "vault secret",
            "GRDBREGISTRY_BACKUP_KEY": "another secret",
            "AWS_ACCESS_KEY_ID": "cloud id",
        ]
        for target in [["--name", "catalog"], ["--tenant", "acme"]] {
            try? FileManager.default.removeItem(atPath: seen)
            let result = try await Registryctl.run(["restore", "--config", config, "--from-replica"] + target, environment: environment)
            #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
            let lines = try String(contentsOfFile: seen, encoding: .utf8).split(separator: "\n").map(String.init)
            #expect(lines.contains("AWS_ACCESS_KEY_ID=cloud id"), "\(lines)")
            for name in ["TENANTS_MASTER", "VAULT_PASSPHRASE", "GRDBREGISTRY_BACKUP_KEY"] {
                #expect(!lines.contains { $0.hasPrefix(name + "=") }, "\(name) reached litestream")
            }
        }
    }
}
