import Foundation
import GRDB
import Testing
@testable import GRDBCipher

/// `CipherFileFormat.isValidPageSize(_:)` owns the page-size rule; the VFS
/// keeps its own copy (it must refuse on its own), the encryption calls and
/// `registryctl` ask the owner. These tests hold every copy to the owner,
/// from the outside: a real encrypted file, the VFS's PRAGMA, the built
/// `registryctl`.
@Suite struct PageSizeRuleTests {
    /// Sizes around every edge of the rule: signs, powers of two below,
    /// inside and above the range, and neighbours of the valid ones.
    static let candidates: [Int] = {
        var sizes: Set<Int> = [-4096, -1, 0, 1, 3, 480, 1000, 1023, 1025, 1536, 3000, 4095, 4097, 12288, 65535, 65537, 98304, Int(Int32.max)]
        for shift in 0...20 {
            sizes.insert(1 << shift)
            sizes.insert((1 << shift) + 1)
        }
        return sizes.sorted()
    }()

    @Test func theRuleAcceptsExactlyThePowersOfTwoFrom1024To65536() {
        let accepted = Self.candidates.filter(CipherFileFormat.isValidPageSize)
        #expect(accepted == [1024, 2048, 4096, 8192, 16384, 32768, 65536])
        #expect(CipherFileFormat.pageSizeRule == "a power of two from 1024 to 65536")
    }

    @Test func encryptingAConfigurationRefusesExactlyWhatTheRuleRefuses() throws {
        for size in Self.candidates {
            var configuration = Configuration()
            if CipherFileFormat.isValidPageSize(size) {
                try configuration.encrypt(with: .passphrase("secret"), kdfIterations: fastIterations, pageSize: size)
            } else {
                #expect(throws: CipherError.invalidPageSize(size)) {
                    try configuration.encrypt(with: .passphrase("secret"), kdfIterations: fastIterations, pageSize: size)
                }
            }
        }
    }

    /// The C copy (Codec.c's valid_page_size, behind
    /// `PRAGMA cipher_page_size`) agrees with the Swift owner: a size the
    /// owner refuses is refused by the VFS for its value; a size the owner
    /// accepts passes that check (and is then refused only because the key
    /// was already used, a different message).
    @Test func theVFSRefusesForItsValueExactlyTheSizesTheRuleRefuses() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("rule.sqlite")
        let queue = try CipherDatabase.queue(atPath: path, key: .passphrase("secret"), kdfIterations: fastIterations)
        defer { try? queue.close() }
        try queue.write { db in try db.execute(sql: "CREATE TABLE t(x)") }
        for size in Self.candidates where size >= 0 && size <= Int(Int32.max) {
            let message: String? = try queue.inDatabase { db in
                do {
                    try db.execute(sql: "PRAGMA cipher_page_size = \(size)")
                    return nil
                } catch let error as DatabaseError {
                    return error.message
                }
            }
            let refusedForValue = message?.contains("a power of two from 1024 to 65536") == true
            #expect(refusedForValue == !CipherFileFormat.isValidPageSize(size), "size \(size): \(message ?? "accepted")")
        }
        // The file is still the one written, with its 4096-byte pages.
        let inspection = try CipherDatabase.inspect(atPath: path, key: .passphrase("secret"), kdfIterations: fastIterations)
        #expect(inspection.problem == nil)
        #expect(inspection.format.pageSize == 4096)
    }

    /// `registryctl encrypt --page-size` and `rekey --new-page-size` refuse
    /// a size the owner refuses, in the owner's words, before any file is
    /// touched; a size it accepts is used.
    @Test func registryctlRefusesPageSizesTheRuleRefusesAndCreatesNothing() async throws {
        let directory = try TemporaryDirectory()
        let plain = directory.path("plain.sqlite")
        let queue = try DatabaseQueue(path: plain)
        try await queue.write { db in try db.execute(sql: "CREATE TABLE t(x); INSERT INTO t VALUES (1)") }
        try queue.close()
        let plainBytes = try Data(contentsOf: URL(fileURLWithPath: plain))
        let registryctl = try registryctlPath()
        let environment = ["PAGE_RULE_KEY": "secret"]

        for size in [512, 3000, 131072] {
            let out = directory.path("refused-\(size).sqlite")
            let encrypt = try await runChildProcess(registryctl, ["encrypt", "--in", plain, "--out", out, "--key-env", "PAGE_RULE_KEY", "--page-size", "\(size)"],
                                              environment: environment, mergingOutput: true)
            #expect(encrypt.status != 0)
            #expect(encrypt.stdout.contains("--page-size is \(CipherFileFormat.pageSizeRule)."), "\(encrypt.stdout)")
            #expect(!FileManager.default.fileExists(atPath: out))

            let rekey = try await runChildProcess(registryctl, ["rekey", plain, "--key-env", "PAGE_RULE_KEY", "--new-key-env", "PAGE_RULE_KEY", "--new-page-size", "\(size)"],
                                            environment: environment, mergingOutput: true)
            #expect(rekey.status != 0)
            #expect(rekey.stdout.contains("--new-page-size is \(CipherFileFormat.pageSizeRule)."), "\(rekey.stdout)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: plain)) == plainBytes)

        let out = directory.path("encrypted.sqlite")
        let accepted = try await runChildProcess(registryctl, ["encrypt", "--in", plain, "--out", out, "--key-env", "PAGE_RULE_KEY", "--page-size", "8192"],
                                           environment: environment, mergingOutput: true)
        #expect(accepted.status == 0, "\(accepted.stdout)")
        let inspection = try CipherDatabase.inspect(atPath: out, key: .passphrase("secret"), pageSize: 8192)
        #expect(inspection.problem == nil)
        #expect(inspection.format.pageSize == 8192)
    }
}
