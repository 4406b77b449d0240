import Foundation
import GRDB
@testable import GRDBCipher
import Synchronization
import Testing

@Suite struct KeyProviderTests {
    let master: TenantMasterKey

    init() throws {
        master = try TenantMasterKey(DatabaseSecret(String(repeating: "0123456789abcdef", count: 4)))
    }

    @Test func theProviderIsAskedForEveryConnectionWithTheDatabasePath() throws {
        let directory = try TemporaryDirectory()
        let asked = Mutex<[String]>([])
        var configuration = Configuration()
        let tenants = TenantEncryption(masterKey: master)
        try configuration.encrypt(kdfIterations: fastIterations) { path in
            asked.withLock { $0.append(path) }
            let tenant = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
            guard let key = try tenants.key(forTenant: tenant, atPath: path) else {
                throw TenantEncryptionError.plaintextTenant(tenant: tenant, path: path)
            }
            return key
        }
        for name in ["acme.sqlite", "globex.sqlite"] {
            let pool = try DatabasePool(path: directory.path(name), configuration: configuration)
            try pool.write { db in try db.execute(sql: "CREATE TABLE t(name TEXT); INSERT INTO t VALUES (?)", arguments: [name]) }
            #expect(try pool.read { db in try String.fetchOne(db, sql: "SELECT name FROM t") } == name)
            try pool.close()
        }
        let paths = asked.withLock { $0 }
        // The writer and at least one reader of each pool.
        #expect(paths.filter { $0 == directory.path("acme.sqlite") }.count >= 2)
        #expect(paths.filter { $0 == directory.path("globex.sqlite") }.count >= 2)
        #expect(Set(paths) == [directory.path("acme.sqlite"), directory.path("globex.sqlite")])

        // Each file has its own key: the other tenant's does not open it.
        let salt = try #require(try FileHandle(forReadingFrom: directory.url.appendingPathComponent("acme.sqlite")).read(upToCount: 16))
        let acmeKey = try CipherKey.tenantKey(master: master, tenant: "acme", salt: salt)
        let globexKey = try CipherKey.tenantKey(master: master, tenant: "globex", salt: salt)
        let acme = try CipherDatabase.queue(atPath: directory.path("acme.sqlite"), key: acmeKey)
        #expect(try acme.read { db in try String.fetchOne(db, sql: "SELECT name FROM t") } == "acme.sqlite")
        #expect(throws: CipherError.wrongKey(path: directory.path("acme.sqlite"))) {
            _ = try CipherDatabase.queue(atPath: directory.path("acme.sqlite"), key: globexKey)
        }
    }

    struct SecretStoreUnavailable: Error, Equatable {}

    @Test func aFailingProviderFailsTheOpeningWithItsErrorAndTouchesNothing() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let queue = try CipherDatabase.queue(atPath: path, key: .passphrase("secret"), kdfIterations: fastIterations)
        try queue.write { db in try db.execute(sql: "CREATE TABLE t(a); INSERT INTO t VALUES (1)") }
        try queue.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        var configuration = Configuration()
        try configuration.encrypt(kdfIterations: fastIterations) { _ in throw SecretStoreUnavailable() }
        #expect(throws: SecretStoreUnavailable()) {
            _ = try DatabaseQueue(path: path, configuration: configuration)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path) == ["db.sqlite"])
    }
}
