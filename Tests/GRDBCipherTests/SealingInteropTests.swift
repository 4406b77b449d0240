import Foundation
@testable import GRDBCipher
import Testing

/// Python's `cryptography` (in the project's venv) as the oracle of the
/// sealed format: it derives the key, builds the associated data and runs
/// AES-256-GCM from the format's documentation alone, not from our bytes.
@Suite struct SealingInteropTests {
    /// `derive KIND MATERIAL`, `open KIND MATERIAL SEALED TENANT EPOCH SEQUENCE`,
    /// `seal KIND MATERIAL PLAINTEXT TENANT EPOCH SEQUENCE OUTPUT`: byte
    /// strings in hex, KIND `passphrase` or `raw` (a CipherKey) or `aes`
    /// (the bytes are the AES key itself); `seal` writes the sealed change
    /// to the file OUTPUT. Arguments, never shell text.
    static let script = #"""
    import os, struct, sys
    try:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    except ImportError as error:
        print("missing cryptography:", error)
        sys.exit(3)

    def key(kind, material):
        material = bytes.fromhex(material)
        if kind == "aes":
            return material
        if kind == "raw":
            material = b"x'" + material.hex().encode() + b"'"
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                    info=b"grdbregistry change sealing v1").derive(material)

    def associated_data(tenant, epoch, sequence):
        tenant = bytes.fromhex(tenant)
        return (bytes([1]) + struct.pack(">Q", len(tenant)) + tenant
                + struct.pack(">QQ", int(epoch), int(sequence)))

    op, kind, material = sys.argv[1:4]
    if op == "derive":
        print(key(kind, material).hex())
    elif op == "open":
        sealed = bytes.fromhex(sys.argv[4])
        assert sealed[0] == 1, "version"
        nonce, body = sealed[1:13], sealed[13:]
        try:
            plaintext = AESGCM(key(kind, material)).decrypt(nonce, body, associated_data(*sys.argv[5:8]))
            print("plaintext", plaintext.hex())
        except InvalidTag:
            print("InvalidTag")
    elif op == "seal":
        nonce = os.urandom(12)
        body = AESGCM(key(kind, material)).encrypt(nonce, bytes.fromhex(sys.argv[4]), associated_data(*sys.argv[5:8]))
        with open(sys.argv[8], "wb") as output:
            output.write(bytes([1]) + nonce + body)
    """#

    static func python(_ arguments: [String]) async throws -> String {
        let install = "pip install cryptography into .build-venv"
        let result = try await runOracle(venvPython, install: install, arguments: ["-c", script] + arguments)
        try #require(result.status != 3, "interop oracle missing: \(venvPython) has no module cryptography (\(install))")
        try #require(result.status == 0, "python: \(result.output)")
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A CipherKey, and how Python is told its material.
    struct Key: Sendable, CustomTestStringConvertible {
        var name: String
        var kind: String
        var material: Data
        var salt: Data?

        func cipherKey() throws -> CipherKey {
            kind == "raw" ? try .raw(material, salt: salt) : .passphrase(String(decoding: material, as: UTF8.self))
        }

        /// Python reads a raw key's material as key and salt together.
        var pythonMaterial: String { hex(material + (salt ?? Data())) }
        var testDescription: String { name }
    }

    static let keys: [Key] = [
        Key(name: "a passphrase", kind: "passphrase", material: Data("correct horse battery staple".utf8)),
        Key(name: "a non-ASCII passphrase", kind: "passphrase", material: Data("p\u{E4}ssw\u{F6}rd \u{2713}".utf8)),
        Key(name: "a raw key", kind: "raw", material: Data((0..<32).map { UInt8($0) })),
        Key(name: "a raw key with its salt", kind: "raw", material: Data(repeating: 0xab, count: 32), salt: Data(0xa0...0xaf)),
    ]

    @Test(arguments: keys)
    func theSealingKeyIsHKDFOfTheKeyMaterial(_ key: Key) async throws {
        let derived = try ChangeSealingKey(deriving: key.cipherKey())
        #expect(hex(derived.bytes) == (try await Self.python(["derive", key.kind, key.pythonMaterial])))
    }

    @Test(arguments: keys)
    func pythonOpensWhatSwiftSeals(_ key: Key) async throws {
        let sealingKey = try ChangeSealingKey(deriving: key.cipherKey())
        let plaintext = Data("INSERT INTO player VALUES (1, 'Arthur')".utf8) + Data((0...255).map { UInt8($0) })
        let tenant = "caf\u{E9}-\u{FC}"
        let sealed = try sealingKey.seal(plaintext, tenant: tenant, epoch: .max, sequence: 1 << 40)
        let opened = try await Self.python(["open", key.kind, key.pythonMaterial, hex(sealed), hex(Data(tenant.utf8)), "\(UInt64.max)", "\(UInt64(1) << 40)"])
        #expect(opened == "plaintext " + hex(plaintext))
        // Python's associated data is meaningful too: another sequence fails there.
        let elsewhere = try await Self.python(["open", key.kind, key.pythonMaterial, hex(sealed), hex(Data(tenant.utf8)), "\(UInt64.max)", "\((UInt64(1) << 40) + 1)"])
        #expect(elsewhere == "InvalidTag")
    }

    @Test(arguments: keys)
    func swiftOpensWhatPythonSeals(_ key: Key) async throws {
        let sealingKey = try ChangeSealingKey(deriving: key.cipherKey())
        let plaintext = Data("DELETE FROM player WHERE id = 1".utf8)
        let directory = try TemporaryDirectory()
        _ = try await Self.python(["seal", key.kind, key.pythonMaterial, hex(plaintext), hex(Data("acme".utf8)), "3", "42", directory.path("sealed")])
        let sealed = try Data(contentsOf: directory.url("sealed"))
        #expect(sealed.count == 29 + plaintext.count)
        #expect(try sealingKey.open(sealed, tenant: "acme", epoch: 3, sequence: 42) == plaintext)
        #expect(throws: ChangeSealingError.authenticationFailed) {
            _ = try sealingKey.open(sealed, tenant: "acme", epoch: 4, sequence: 42)
        }
        // Python's empty change too: 29 bytes, nothing but header and tag.
        _ = try await Self.python(["seal", key.kind, key.pythonMaterial, "", hex(Data("acme".utf8)), "0", "0", directory.path("empty")])
        let empty = try Data(contentsOf: directory.url("empty"))
        #expect(try sealingKey.open(empty, tenant: "acme", epoch: 0, sequence: 0) == Data())
    }

    @Test func theDatabaseKeyMaterialDoesNotOpenASealedChange() async throws {
        // 32 bytes each: usable as AES-256 keys if the sealing key were them.
        let material = Data("0123456789abcdef0123456789abcdef".utf8)
        for cipherKey in [CipherKey.passphrase(String(decoding: material, as: UTF8.self)), try .raw(material)] {
            let sealed = try ChangeSealingKey(deriving: cipherKey).seal(Data("abc".utf8), tenant: "acme", epoch: 1, sequence: 1)
            let opened = try await Self.python(["open", "aes", hex(material), hex(sealed), hex(Data("acme".utf8)), "1", "1"])
            #expect(opened == "InvalidTag", "sealing key of \(cipherKey == .passphrase(String(decoding: material, as: UTF8.self)) ? "the passphrase" : "the raw key")")
        }
    }
}

private func hex(_ data: Data) -> String {
    data.map { String(format: "%02x", $0) }.joined()
}
