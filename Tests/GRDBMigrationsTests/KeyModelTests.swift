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
    @Test func tenantKeysAreHKDFWithALabelTheTenantAndTheFileSalt() throws {
        let master = Data((0..<32).map { UInt8($0 * 7 & 0xff) })
        let salt = Data((0..<16).map { UInt8(200 - $0) })
        let script = """
        import hmac, hashlib, sys
        master = bytes.fromhex(sys.argv[1]); salt = bytes.fromhex(sys.argv[2])
        prk = hmac.new(salt, master, hashlib.sha256).digest()
        info = b"GRDBRegistry tenant database key v1" + b"\\x00" + b"acme"
        print(hmac.new(prk, info + b"\\x01", hashlib.sha256).hexdigest())
        """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, master.hexString, salt.hexString]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let expected = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
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
}
