import Foundation
@testable import GRDBCipher
import Testing

@Suite struct SealingTests {
    static let passphraseKey = CipherKey.passphrase("correct horse battery staple")

    static func sealingKey(_ key: CipherKey = passphraseKey) throws -> ChangeSealingKey {
        try ChangeSealingKey(deriving: key)
    }

    struct Change: Sendable, CustomTestStringConvertible {
        var plaintext: Data
        var tenant: String
        var epoch: UInt64
        var sequence: UInt64
        var testDescription: String { "\(plaintext.count) bytes of \(String(reflecting: tenant)) at \(epoch)/\(sequence)" }
    }

    static let changes: [Change] = [
        Change(plaintext: Data(), tenant: "acme", epoch: 0, sequence: 0),
        Change(plaintext: Data([0]), tenant: "", epoch: 1, sequence: 1),
        Change(plaintext: Data("INSERT INTO player VALUES (1)".utf8), tenant: "caf\u{E9}-\u{FC}", epoch: .max, sequence: .max),
        Change(plaintext: Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }), tenant: "globex", epoch: 3, sequence: 42),
    ]

    @Test(arguments: changes)
    func aSealedChangeOpensToItsPlaintext(_ change: Change) throws {
        let key = try Self.sealingKey()
        let sealed = try key.seal(change.plaintext, tenant: change.tenant, epoch: change.epoch, sequence: change.sequence)
        #expect(sealed.count == 1 + 12 + change.plaintext.count + 16)
        #expect(sealed.first == 1)
        // A key derived again from the same CipherKey opens it too.
        let opened = try Self.sealingKey().open(sealed, tenant: change.tenant, epoch: change.epoch, sequence: change.sequence)
        #expect(opened == change.plaintext)
    }

    @Test func aSealedChangeOpensFromASliceOfLargerData() throws {
        let key = try Self.sealingKey()
        let plaintext = Data("UPDATE player SET score = 2".utf8)
        let stored = Data("prefix".utf8) + (try key.seal(plaintext, tenant: "acme", epoch: 1, sequence: 2)) + Data("suffix".utf8)
        let sealed = stored.dropFirst(6).dropLast(6)
        #expect(sealed.startIndex == 6)
        #expect(try key.open(sealed, tenant: "acme", epoch: 1, sequence: 2) == plaintext)
    }

    @Test func sealingTheSameChangeTwiceGivesDifferentBytes() throws {
        let key = try Self.sealingKey()
        let plaintext = Data("INSERT INTO player VALUES (1)".utf8)
        let sealings = try (0..<32).map { _ in try key.seal(plaintext, tenant: "acme", epoch: 1, sequence: 1) }
        #expect(Set(sealings).count == sealings.count)
        #expect(Set(sealings.map { $0.dropFirst().prefix(12) }).count == sealings.count, "every seal has a nonce of its own")
        for sealed in sealings {
            #expect(try key.open(sealed, tenant: "acme", epoch: 1, sequence: 1) == plaintext)
        }
    }

    @Test func aSealedChangeHoldsNoPartOfItsPlaintext() throws {
        let key = try Self.sealingKey()
        let plaintext = Data(String(repeating: "INSERT INTO secret VALUES ('credit card 4111 1111 1111 1111');\n", count: 20).utf8)
        let sealed = try key.seal(plaintext, tenant: "acme", epoch: 1, sequence: 1)
        #expect(sealed.range(of: plaintext) == nil)
        // Not even an 8-byte window of it: the plaintext is repetitive, so
        // any leak of structure would show.
        let sealedBytes = [UInt8](sealed)
        let plaintextBytes = [UInt8](plaintext)
        let windows = Set(stride(from: 0, to: plaintextBytes.count - 8, by: 1).map { plaintextBytes[$0..<($0 + 8)] })
        let leaked = (0..<(sealedBytes.count - 8)).filter { windows.contains(sealedBytes[$0..<($0 + 8)]) }
        #expect(leaked.isEmpty, "plaintext bytes at offsets \(leaked.prefix(5)) of the sealed change")
    }

    enum KeyChoice: Sendable {
        case passphrase(String)
        case raw(Data)

        func cipherKey() throws -> CipherKey {
            switch self {
            case let .passphrase(passphrase): return .passphrase(passphrase)
            case let .raw(bytes): return try .raw(bytes)
            }
        }
    }

    struct Mismatch: Sendable, CustomTestStringConvertible {
        var name: String
        var key: KeyChoice = .passphrase("correct horse battery staple")
        var tenant = "caf\u{E9}"
        var epoch: UInt64 = 7
        var sequence: UInt64 = 9
        var testDescription: String { name }
    }

    /// Sealed as tenant "café" (precomposed é), epoch 7, sequence 9 under
    /// ``passphraseKey``.
    static let mismatches: [Mismatch] = [
        Mismatch(name: "another tenant", tenant: "caf\u{EA}"),
        Mismatch(name: "a tenant that is a prefix", tenant: "caf"),
        Mismatch(name: "the tenant in another Unicode normalization", tenant: "cafe\u{301}"),
        Mismatch(name: "another epoch", epoch: 8),
        Mismatch(name: "another sequence", sequence: 10),
        Mismatch(name: "epoch and sequence swapped", epoch: 9, sequence: 7),
        Mismatch(name: "another passphrase", key: .passphrase("correct horse battery stapler")),
        Mismatch(name: "a raw key", key: .raw(Data((0..<32).map { UInt8($0) }))),
    ]

    @Test(arguments: mismatches)
    func aSealedChangeDoesNotOpenElsewhere(_ mismatch: Mismatch) throws {
        let sealed = try Self.sealingKey().seal(Data("DELETE FROM player".utf8), tenant: "caf\u{E9}", epoch: 7, sequence: 9)
        #expect(try Self.sealingKey().open(sealed, tenant: "caf\u{E9}", epoch: 7, sequence: 9) == Data("DELETE FROM player".utf8))
        let key = try ChangeSealingKey(deriving: mismatch.key.cipherKey())
        #expect(throws: ChangeSealingError.authenticationFailed) {
            _ = try key.open(sealed, tenant: mismatch.tenant, epoch: mismatch.epoch, sequence: mismatch.sequence)
        }
    }

    @Test func everyFlippedBitIsRefused() throws {
        let key = try Self.sealingKey()
        let plaintext = Data("INSERT INTO player VALUES (1)".utf8)
        let sealed = try key.seal(plaintext, tenant: "acme", epoch: 1, sequence: 1)
        var refused = 0
        for byte in 0..<sealed.count {
            for bit in 0..<8 {
                var modified = sealed
                modified[byte] ^= UInt8(1 << bit)
                // The version byte is the header: a flip there makes another
                // version, refused before any decryption.
                let expected: ChangeSealingError = byte == 0 ? .unsupportedVersion(modified[0]) : .authenticationFailed
                #expect(throws: expected, "bit \(bit) of byte \(byte)") {
                    _ = try key.open(modified, tenant: "acme", epoch: 1, sequence: 1)
                }
                refused += 1
            }
        }
        #expect(refused == (1 + 12 + plaintext.count + 16) * 8)
    }

    @Test func aShortSealedChangeIsTruncated() throws {
        let key = try Self.sealingKey()
        let empty = try key.seal(Data(), tenant: "acme", epoch: 1, sequence: 1)
        #expect(empty.count == 29)
        #expect(try key.open(empty, tenant: "acme", epoch: 1, sequence: 1) == Data())
        for count in 0..<29 {
            #expect(throws: ChangeSealingError.truncated(count: count)) {
                _ = try key.open(empty.prefix(count), tenant: "acme", epoch: 1, sequence: 1)
            }
        }
        // Shortened, a longer change is still long enough: its tag fails.
        let sealed = try key.seal(Data("abc".utf8), tenant: "acme", epoch: 1, sequence: 1)
        #expect(throws: ChangeSealingError.authenticationFailed) {
            _ = try key.open(sealed.dropLast(), tenant: "acme", epoch: 1, sequence: 1)
        }
    }

    @Test(arguments: [UInt8(0), 2, 0x81, 255])
    func anotherFormatVersionIsUnsupported(_ version: UInt8) throws {
        let key = try Self.sealingKey()
        var sealed = try key.seal(Data("abc".utf8), tenant: "acme", epoch: 1, sequence: 1)
        sealed[0] = version
        #expect(throws: ChangeSealingError.unsupportedVersion(version)) {
            _ = try key.open(sealed, tenant: "acme", epoch: 1, sequence: 1)
        }
        #expect(throws: ChangeSealingError.unsupportedVersion(version)) {
            _ = try key.open(Data([version]) + Data(count: 40), tenant: "acme", epoch: 1, sequence: 1)
        }
    }

    @Test func passphraseAndRawKeysDeriveDifferentSealingKeysThatAreNotTheDatabaseKeys() throws {
        // A 32-byte passphrase made of the raw key's bytes: the two database
        // keys share their bytes, and still seal apart.
        let bytes = Data("0123456789abcdef0123456789abcdef".utf8)
        let passphrase = try ChangeSealingKey(deriving: .passphrase(String(decoding: bytes, as: UTF8.self)))
        let raw = try ChangeSealingKey(deriving: .raw(bytes))
        let rawWithSalt = try ChangeSealingKey(deriving: .raw(bytes, salt: Data(repeating: 9, count: 16)))
        #expect(passphrase.bytes.count == 32)
        #expect(passphrase.bytes != raw.bytes)
        #expect(raw.bytes != rawWithSalt.bytes)
        for key in [passphrase, raw, rawWithSalt] {
            #expect(key.bytes != bytes)
        }
        let sealed = try raw.seal(Data("abc".utf8), tenant: "acme", epoch: 1, sequence: 1)
        #expect(throws: ChangeSealingError.authenticationFailed) {
            _ = try passphrase.open(sealed, tenant: "acme", epoch: 1, sequence: 1)
        }
    }

    @Test func keysThatSQLCipherTakesForOneKeySealAlike() throws {
        // SQLCipher reads the passphrase "x'<64 hex>'" as that raw key.
        let bytes = Data(repeating: 7, count: 32)
        let raw = try ChangeSealingKey(deriving: .raw(bytes))
        let spelled = try ChangeSealingKey(deriving: .passphrase("x'" + String(repeating: "07", count: 32) + "'"))
        let sealed = try raw.seal(Data("abc".utf8), tenant: "acme", epoch: 1, sequence: 1)
        #expect(try spelled.open(sealed, tenant: "acme", epoch: 1, sequence: 1) == Data("abc".utf8))
    }

    struct BadPassphrase: Sendable, CustomTestStringConvertible {
        var passphrase: String
        var testDescription: String { passphrase.isEmpty ? "an empty passphrase" : "a passphrase with a NUL byte" }
    }

    @Test(arguments: [BadPassphrase(passphrase: ""), BadPassphrase(passphrase: "pass\0word")])
    func aPassphraseThatCantBeAKeyDerivesNoSealingKey(_ bad: BadPassphrase) {
        let error = #expect(throws: CipherError.self) {
            _ = try ChangeSealingKey(deriving: .passphrase(bad.passphrase))
        }
        guard case .invalidKey? = error else {
            Issue.record("expected CipherError.invalidKey, got \(String(describing: error))")
            return
        }
    }

    @Test func aSealingKeyNeverPrints() throws {
        let key = try Self.sealingKey()
        #expect(String(describing: key) == "<redacted>")
        #expect(String(reflecting: key) == "ChangeSealingKey(<redacted>)")
        var dumped = ""
        dump(key, to: &dumped)
        let hex = key.bytes.map { String(format: "%02x", $0) }.joined()
        #expect(!dumped.contains(hex), "\(dumped)")
    }

    @Test func sealingErrorsSayWhatWasWrong() {
        #expect(ChangeSealingError.truncated(count: 5).description.contains("at least 29 bytes"))
        #expect(ChangeSealingError.truncated(count: 5).description.contains("not 5"))
        #expect(ChangeSealingError.unsupportedVersion(2).description.contains("version 2"))
        #expect(ChangeSealingError.authenticationFailed.description.contains("tenant, epoch or sequence"))
    }
}
