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

    /// RFC 5869, appendix A, test cases 1 to 3 (HKDF-SHA256).
    struct RFC5869Case: Sendable, CustomTestStringConvertible {
        var number: Int
        var ikm: Data
        var salt: Data
        var info: Data
        var okm: String

        var testDescription: String { "test case \(number)" }
    }

    static let rfc5869Cases: [RFC5869Case] = [
        RFC5869Case(
            number: 1, ikm: Data(repeating: 0x0b, count: 22), salt: Data(0x00...0x0c), info: Data(0xf0...0xf9),
            okm: "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"),
        RFC5869Case(
            number: 2, ikm: Data(0x00...0x4f), salt: Data(0x60...0xaf), info: Data(0xb0...0xff),
            okm: "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c"
                + "59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71"
                + "cc30c58179ec3e87c14c01d5c1f3434f1d87"),
        RFC5869Case(
            number: 3, ikm: Data(repeating: 0x0b, count: 22), salt: Data(), info: Data(),
            okm: "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"),
    ]

    @Test(arguments: rfc5869Cases)
    func hkdfGivesRFC5869TestVectors(_ vector: RFC5869Case) throws {
        let okm = try CipherKey.hkdfSHA256(key: vector.ikm, salt: vector.salt, info: vector.info, length: vector.okm.count / 2)
        #expect(okm.map { String(format: "%02x", $0) }.joined() == vector.okm)
    }

    @Test func hkdfRefusesAnOutputLongerThanRFC5869Allows() throws {
        // 255 blocks of SHA-256 is HKDF's limit; OpenSSL refuses more,
        // and the error surfaces as a typed one, with no key.
        let error = #expect(throws: CipherError.self) {
            _ = try CipherKey.hkdfSHA256(key: Data(repeating: 1, count: 32), salt: Data(), info: Data(), length: 255 * 32 + 1)
        }
        guard case .invalidKey(let reason)? = error else {
            Issue.record("expected CipherError.invalidKey, got \(String(describing: error))")
            return
        }
        #expect(reason.hasPrefix("key derivation failed (libcrypto HKDF"), "\(reason)")
        #expect(try CipherKey.hkdfSHA256(key: Data(repeating: 1, count: 32), salt: Data(), info: Data(), length: 255 * 32).count == 255 * 32)
        #expect(throws: CipherError.self) {
            _ = try CipherKey.hkdfSHA256(key: Data(repeating: 1, count: 32), salt: Data(), info: Data(), length: 0)
        }
    }
}
