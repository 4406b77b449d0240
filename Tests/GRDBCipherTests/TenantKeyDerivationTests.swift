import Foundation
@testable import GRDBCipher
import Testing

@Suite struct TenantKeyDerivationTests {
    /// A tenant key, written as its raw-key secret `x'<key><salt>'`.
    struct FrozenKey: Sendable, CustomTestStringConvertible {
        var master: String
        var tenant: String
        var salt: Data
        var key: String

        var testDescription: String { "tenant \(String(reflecting: tenant))" }
    }

    // Keys derived by the hand-written HKDF over HMAC that preceded
    // OpenSSL's HKDF: a change of derivation would lock every encrypted
    // tenant out of its file, so these values never change.
    static let frozenKeys: [FrozenKey] = [
        FrozenKey(
            master: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", tenant: "acme",
            salt: Data(0xa0...0xaf),
            key: "e186a255b06c8f732179468a056fe345d47e0e1fdcf0e37c35f11742fe90392b"),
        FrozenKey(
            master: String(repeating: "ff", count: 32), tenant: "globex",
            salt: Data(repeating: 1, count: 16),
            key: "97c4ab311c0273517f65122ee91ce4bf64335f9cdafe91f41f13b6bd9305224e"),
        FrozenKey(
            master: String(repeating: "0123456789abcdef", count: 4), tenant: "caf\u{E9}-\u{FC}",
            salt: Data(0x00...0x0f),
            key: "0fd0368e9531fe1dfa8f1d5feccc901a6ce9902af105ddc65f5741530dfe8757"),
        FrozenKey(
            master: String(repeating: "0123456789abcdef", count: 4), tenant: "acme",
            salt: Data(0x00...0x0f),
            key: "7adb893b5d46b7972f7ea1e733ffaaa18b159e31680c531bed541ddc1171ef00"),
    ]

    @Test(arguments: frozenKeys)
    func tenantKeysAreTheKeysDerivedBefore(_ frozen: FrozenKey) throws {
        let master = try TenantMasterKey(DatabaseSecret(frozen.master))
        let derived = try CipherKey.tenantKey(master: master, tenant: frozen.tenant, salt: frozen.salt)
        let salt = frozen.salt.map { String(format: "%02x", $0) }.joined()
        #expect(derived == (try CipherKey(DatabaseSecret("x'\(frozen.key)\(salt)'"))))
    }
}
