import Foundation
import Testing

/// C reproductions of the security review, built with AddressSanitizer
/// against the VFS sources (Tests/CipherRepros), and run as child processes.
@Suite struct AddressSanitizerTests {
    static let root = repositoryRoot

    @Test func plaintextHeaderSizesThatNoLongerFitAreRefusedWithoutMemoryErrors() async throws {
        try await runRepro("header_size_asan")
    }

    /// Review security-2, repro n1: a 64-byte plaintext header left the
    /// auto-vacuum flag unauthenticated, and a zeroed page read back.
    @Test func aPlaintextHeaderCannotExposeTheAutoVacuumFlag() async throws {
        try await runRepro("n1_hdr64_autovacuum")
    }

    /// Builds `Tests/CipherRepros/<name>.c` with AddressSanitizer against
    /// the VFS sources, runs it on a scratch file: exit status 0, no report.
    private func runRepro(_ name: String) async throws {
        let directory = try TemporaryDirectory()
        let vfs = Self.root.appendingPathComponent("Sources/CSQLCipherVFS").path
        let sources = try FileManager.default.contentsOfDirectory(atPath: vfs).filter { $0.hasSuffix(".c") }.map { vfs + "/" + $0 }
        let binary = directory.path(name)
        let compile = try await run("/usr/bin/cc", [
            "-g", "-O1", "-fsanitize=address", "-fno-omit-frame-pointer", "-w",
            "-I", vfs, "-I", vfs + "/include", "-DOPENSSL_API_COMPAT=0x10100000L",
            "-o", binary, Self.root.appendingPathComponent("Tests/CipherRepros/\(name).c").path,
        ] + sources + ["-lcrypto", "-lsqlite3", "-lpthread"])
        try #require(compile.status == 0, "\(compile.output)")
        let result = try await run(binary, [directory.path("db.sqlite")])
        #expect(result.status == 0, "\(result.output)")
        #expect(!result.output.contains("AddressSanitizer"), "\(result.output)")
    }

    private func run(_ executable: String, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        let result = try await runChildProcess(executable, arguments, mergingOutput: true)
        return (result.status, result.stdout)
    }
}
