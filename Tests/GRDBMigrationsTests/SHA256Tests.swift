import GRDBDigests
import Foundation
import GRDBMigrations
import Testing

@Suite struct SHA256Tests {
    @Test func matchesPublishedTestVectors() {
        #expect(SHA256.hexDigest(of: []) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hexDigest(of: Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        // 56 bytes: the padding needs a second block.
        #expect(SHA256.hexDigest(of: Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test func matchesSha256sumOnEveryLengthAroundBlockBoundaries() async throws {
        let directory = try TemporaryDirectory()
        var bytes: [UInt8] = []
        var expected: [String: String] = [:]
        for length in [1, 55, 63, 64, 65, 119, 120, 1000, 4097] {
            bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let path = directory.path("input-\(length)")
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            expected[path] = SHA256.hexDigest(of: bytes)
        }
        // sha256sum (coreutils) is the oracle.
        let sha256sum = try await runChildProcess("/usr/bin/env", ["sha256sum"] + expected.keys.sorted())
        #expect(sha256sum.status == 0, "\(sha256sum.stderr)")
        let output = sha256sum.stdout
        let lines = output.split(separator: "\n")
        #expect(lines.count == expected.count)
        for line in lines {
            let parts = line.split(separator: " ", maxSplits: 1)
            let path = String(parts[1]).trimmingCharacters(in: .whitespaces)
            #expect(expected[path] == String(parts[0]), "\(path)")
        }
    }
}
