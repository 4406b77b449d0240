import Foundation
import GRDB
import GRDBCipher
import Testing

/// The key model of GRDBCipher that the daemon and registryctl share.
@Suite struct KeyModelTests {
    @Test func keySourcesReadBytesAndDropOnlyOneFinalNewline() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("key")
        try Data([0x61, 0x00, 0xff, 0x0a, 0x0d, 0x0a]).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o600)    // key files open to others are refused
        #expect(try KeySource.file(path).read().bytes == Data([0x61, 0x00, 0xff, 0x0a]))
        #expect(try KeySource.environment("K").read(environment: ["K": "pass\n"]).bytes == Data("pass".utf8))
        #expect(throws: KeySourceError.environmentVariableNotSet("K")) { try KeySource.environment("K").read(environment: [:]) }
        try Data("\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: KeySourceError.emptyFile(path: path)) { try KeySource.file(path).read() }
    }

    @Test func secretsAreRedactedEvenInDumps() {
        let secret = DatabaseSecret("hunter2-secret")
        var dumped = ""
        dump(secret, to: &dumped)
        #expect("\(secret)" == "<redacted>" && "\(String(reflecting: secret))" == "DatabaseSecret(<redacted>)")
        #expect(!dumped.contains("hunter2"), "\(dumped)")
    }

    @Test func masterKeysAre32BytesInHexOrBase64() throws {
        let bytes = Data((0..<32).map { UInt8($0) })
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        let salt = Data(repeating: 9, count: 16)
        let fromHex = try CipherKey.tenantKey(master: TenantMasterKey(DatabaseSecret(hex + "\n")), tenant: "acme", salt: salt)
        let fromBase64 = try CipherKey.tenantKey(master: TenantMasterKey(DatabaseSecret(bytes.base64EncodedString())), tenant: "acme", salt: salt)
        #expect(fromHex == fromBase64)
        for weak in ["correct horse battery staple", String(hex.dropLast(2)), Data(repeating: 1, count: 16).base64EncodedString()] {
            #expect(throws: CipherError.self) { try TenantMasterKey(DatabaseSecret(weak)) }
        }
    }

    /// HKDF-SHA256 as RFC 5869 defines it, computed by Python's hmac module.
    @Test func tenantKeysAreHKDFWithALabelTheTenantAndTheFileSalt() async throws {
        let master = Data((0..<32).map { UInt8($0 * 7 & 0xff) })
        let salt = Data((0..<16).map { UInt8(200 - $0) })
        let script = """
        import hmac, hashlib, sys
        master = bytes.fromhex(sys.argv[1]); salt = bytes.fromhex(sys.argv[2])
        prk = hmac.new(salt, master, hashlib.sha256).digest()
        info = b"GRDBRegistry tenant database key v1" + b"\\x00" + b"acme"
        print(hmac.new(prk, info + b"\\x01", hashlib.sha256).hexdigest())
        """
        let python = try await runChildProcess("/usr/bin/env", ["python3", "-c", script, master.hexString, salt.hexString])
        #expect(python.status == 0, "\(python.stderr)")
        let expected = python.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let masterKey = try TenantMasterKey(DatabaseSecret(master.hexString))
        let key = try CipherKey.tenantKey(master: masterKey, tenant: "acme", salt: salt)
        let expectedBytes = try #require(Data(hex: expected))
        #expect(expectedBytes.count == 32)
        #expect(key == (try CipherKey.raw(expectedBytes, salt: salt)))
        // Another tenant, or another incarnation (salt) of the same id, gets another key.
        #expect(key != (try CipherKey.tenantKey(master: masterKey, tenant: "acmf", salt: salt)))
        #expect(key != (try CipherKey.tenantKey(master: masterKey, tenant: "acme", salt: Data(repeating: 0, count: 16))))
    }
}

extension Data {
    var hexString: String { map { String(format: "%02x", $0) }.joined() }

    init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = 0
        while index < digits.count {
            guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
            index += 2
        }
        self.init(bytes)
    }

    /// One step of a master-key rotation: refused cases keep the file as it was.
    @Test func tenantRekeyRefusesWhatItCannotRotateAndLeavesTheFile() throws {
        let directory = try TemporaryDirectory()
        let old = try TenantMasterKey(DatabaseSecret(String(repeating: "1f", count: 32)))
        let new = try TenantMasterKey(DatabaseSecret(String(repeating: "2e", count: 32)))
        let other = try TenantMasterKey(DatabaseSecret(String(repeating: "3d", count: 32)))
        func create(_ tenant: String, _ master: TenantMasterKey?) throws -> String {
            let path = directory.path("\(tenant).sqlite")
            let key = try master.flatMap { try TenantEncryption(masterKey: $0).key(forTenant: tenant, atPath: path) }
            let queue = try CipherDatabase.queue(atPath: path, key: key)
            try queue.write { try $0.execute(sql: "CREATE TABLE t(a); INSERT INTO t VALUES (1)") }
            try queue.close()
            return path
        }
        let current = TenantEncryption(masterKey: old)

        let stranger = try create("stranger", other)
        let before = try fileBytes(stranger)
        #expect(throws: TenantEncryptionError.opensWithNeitherMasterKey(tenant: "stranger", path: stranger)) {
            try current.rekey(tenant: "stranger", atPath: stranger, to: new)
        }
        #expect(try fileBytes(stranger) == before)

        let plain = try create("plain", nil)
        #expect(throws: TenantEncryptionError.plaintextTenant(tenant: "plain", path: plain)) {
            try current.rekey(tenant: "plain", atPath: plain, to: new)
        }
        #expect(try TenantEncryption(masterKey: old, allowsPlaintextTenants: true).rekey(tenant: "plain", atPath: plain, to: new) == .plain)
        #expect(CipherDatabase.isEncrypted(atPath: plain) == false)
        #expect(throws: TenantEncryptionError.noMasterKey(tenant: "plain")) {
            try TenantEncryption.none.rekey(tenant: "plain", atPath: plain, to: new)
        }

        // A tenant id is part of the key: a file renamed to another tenant
        // opens with neither of that tenant's keys.
        let acme = try create("acme", old)
        #expect(throws: TenantEncryptionError.opensWithNeitherMasterKey(tenant: "globex", path: acme)) {
            try current.rekey(tenant: "globex", atPath: acme, to: new)
        }
        #expect(try current.rekey(tenant: "acme", atPath: acme, to: new) == .rekeyed)
        #expect(try current.rekey(tenant: "acme", atPath: acme, to: new) == .alreadyRekeyed)
        #expect(try TenantEncryption(masterKey: new).key(forTenant: "acme", atPath: acme).map {
            try CipherDatabase.queue(atPath: acme, key: $0).read { try Int.fetchOne($0, sql: "SELECT a FROM t") }
        } == 1)
    }
}
