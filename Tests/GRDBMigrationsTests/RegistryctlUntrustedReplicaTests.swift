import Foundation
import GRDB
import GRDBMigrations
import Testing

/// Review security-2, L5, through `LitestreamRestore`: what a replica
/// gives back is a file from elsewhere. A stand-in `litestream` (a real
/// process) "restores" a crafted database: one trigger more than its
/// migrations create. `registryctl restore --from-replica` refuses it,
/// naming the trigger, and publishes nothing.
@Suite(.serialized) struct RegistryctlUntrustedReplicaTests {
    @Test func aReplicaWithSchemaObjectsItsMigrationsDoNotCreateIsRefused() async throws {
        let directory = try TemporaryDirectory()
        let migrations = directory.path("migrations")
        try FileManager.default.createDirectory(atPath: migrations, withIntermediateDirectories: true)
        try Data("CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n".utf8)
            .write(to: URL(fileURLWithPath: migrations + "/0001_create_item.sql"))
        for (name, extra) in [("crafted", "CREATE TRIGGER evil AFTER INSERT ON item BEGIN DELETE FROM item; END"), ("clean", nil)] {
            let queue = try DatabaseQueue(path: directory.path("\(name).sqlite"))
            try DatabaseMigrationRunner(set: MigrationSet(directory: URL(fileURLWithPath: migrations))).migrate(queue)
            if let extra { try await queue.write { try $0.execute(sql: extra) } }
            try queue.close()
        }
        let litestream = directory.path("litestream")
        // `litestream restore -o PATH URL`: copies $SOURCE to PATH.
        try Data("""
            #!/bin/sh
            while [ "$1" != "-o" ]; do shift; done
            cp "$SOURCE" "$2"
            """.utf8).write(to: URL(fileURLWithPath: litestream))
        chmod(litestream, 0o700)
        let config = directory.path("registry.json")
        try Data("""
            {
              "databases": {"catalog": {"path": "data/catalog.sqlite", "migrations": "\(migrations)"}},
              "replication": {"replica": "replica", "litestream": "\(litestream)", "socket": "ls.sock"}
            }
            """.utf8).write(to: URL(fileURLWithPath: config))
        let destination = directory.path("data/catalog.sqlite")

        let refused = try await Registryctl.run(["restore", "--config", config, "--from-replica", "--name", "catalog"],
                                          environment: ["SOURCE": directory.path("crafted.sqlite")])
        #expect(refused.status == 1, "\(refused.stdout)\(refused.stderr)")
        #expect(refused.stdout.contains("trigger evil"), "\(refused.stdout)\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: destination))

        let restored = try await Registryctl.run(["restore", "--config", config, "--from-replica", "--name", "catalog"],
                                           environment: ["SOURCE": directory.path("clean.sqlite")])
        #expect(restored.status == 0, "\(restored.stdout)\(restored.stderr)")
        #expect(FileManager.default.fileExists(atPath: destination))
    }
}
