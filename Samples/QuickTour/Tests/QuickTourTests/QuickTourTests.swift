import Foundation
import Testing

/// Runs the real QuickTour executable, as the README tells a newcomer to.
@Suite struct QuickTourTests {
    @Test func tourRegistersTwoDatabasesAndPrintsLiveUpdates() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("QuickTour-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }

        let output = try runQuickTour(arguments: [directory.path])
        let lines = output.split(separator: "\n").map(String.init)

        #expect(lines.first == "registered: audit, players")
        #expect(lines.contains("leaderboard: (empty)"))
        // Live updates arrived while the tour wrote.
        #expect(lines.filter { $0.hasPrefix("leaderboard: ") }.count >= 2)
        #expect(lines.contains("read-only context refused a write: 8 (attempt to write a readonly database)"))
        #expect(lines.contains("players by name: 3 players"))
        #expect(lines.contains("arthur: gone (last score 120)"))
        #expect(lines.contains("events: 4"))
        #expect(lines.contains("final leaderboard: Barbara 300, Diane 210, Craig 80"))
        #expect(lines.last == "done")

        // The data is on disk, in the directory given.
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("players.sqlite").path))
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("audit.sqlite").path))

        // A second run starts over on the same files.
        let again = try runQuickTour(arguments: [directory.path])
        #expect(again.split(separator: "\n").last == "done")
    }

    private func runQuickTour(arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = try quickTourExecutable()
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        return String(decoding: data, as: UTF8.self)
    }

    /// The executable sits in the build products directory, next to the test bundle.
    private func quickTourExecutable() throws -> URL {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("QuickTour")
            if FileManager.default.isExecutableFile(atPath: candidate.path) {
                return candidate
            }
            directory.deleteLastPathComponent()
        }
        throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "QuickTour executable near \(CommandLine.arguments[0])"])
    }
}
