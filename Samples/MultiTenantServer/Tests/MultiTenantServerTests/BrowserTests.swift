import Foundation
import Synchronization
import Testing

/// The page at `/`, in a real headless browser (Debian's chromium,
/// installed by scripts/bootstrap): sign in with a tenant token, see the
/// live leaderboard, and see a player posted by another client appear.
@Suite struct BrowserTests {
    static let outputDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("TestOutput")

    @Test func pageShowsAPlayerPostedByAnotherClientWithinOneSecond() async throws {
        let chromium = try #require(Self.chromium(), "chromium is not installed: run scripts/bootstrap")
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data) { server, api in
            let token = try await api.createTenant(#"{"id":"acme","name":"Acme"}"#)
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":10}"#, token: token).status == 201)
            // The token goes in the fragment: the page signs in with it,
            // and a fragment is never sent to the server.
            let pageURL = "\(server.baseURL)/#token=\(token)"

            let browser = try Browser.launch(chromium, url: pageURL)
            defer { browser.stop() }
            let signedIn = try await browser.waitForConsole(containing: #"MTS rendered ["Arthur"]"#, timeout: .seconds(60))
            #expect(signedIn, "the page did not render the leaderboard:\n\(browser.output)")

            // A second client adds a player: the page shows it, pushed by
            // server-sent events, within a second.
            let posted = ContinuousClock.now
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Zed","score":99}"#, token: token).status == 201)
            let appeared = try await browser.waitForConsole(containing: #"MTS rendered ["Zed","Arthur"]"#, timeout: .seconds(5))
            let delay = ContinuousClock.now - posted
            #expect(appeared, "the new player never appeared:\n\(browser.output)")
            #expect(delay < .seconds(1), "the new player appeared after \(delay)")

            // What a user sees: a screenshot, and the DOM, from a fresh
            // browser on the same URL.
            try FileManager.default.createDirectory(at: Self.outputDirectory, withIntermediateDirectories: true)
            let screenshot = Self.outputDirectory.appendingPathComponent("leaderboard.png")
            try? FileManager.default.removeItem(at: screenshot)
            let dom = try Browser.run(chromium, ["--dump-dom", "--virtual-time-budget=3000"], url: pageURL)
            #expect(dom.contains(#"data-player="Zed""#) && dom.contains(#"data-player="Arthur""#), "\(dom)")
            #expect(dom.contains("· Acme"))
            _ = try Browser.run(chromium, ["--screenshot=\(screenshot.path)", "--window-size=900,700", "--virtual-time-budget=3000"], url: pageURL)
            #expect(FileManager.default.fileExists(atPath: screenshot.path), "no screenshot at \(screenshot.path)")
        }
    }

    static func chromium() -> URL? {
        for path in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] where FileManager.default.isExecutableFile(atPath: path) {
            return URL(fileURLWithPath: path)
        }
        return nil
    }
}

/// A headless chromium process, whose console messages (and logs) we read.
final class Browser: Sendable {
    private let process: Process
    private let profile: URL
    private let log: OutputBuffer

    private init(process: Process, profile: URL, log: OutputBuffer) {
        self.process = process
        self.profile = profile
        self.log = log
    }

    var output: String { log.text }

    static let baseArguments = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions", "--disable-dev-shm-usage"]

    /// Starts chromium on `url`, logging the page's console to stderr.
    static func launch(_ chromium: URL, url: String) throws -> Browser {
        let profile = temporaryTestDirectory()
        let process = Process()
        process.executableURL = chromium
        process.arguments = baseArguments + ["--user-data-dir=\(profile.path)", "--enable-logging=stderr", "--v=0", url]
        let pipe = Pipe()
        let log = OutputBuffer()
        pipe.fileHandleForReading.readabilityHandler = { handle in log.append(handle.availableData) }
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        return Browser(process: process, profile: profile, log: log)
    }

    /// Waits until the page logs a console message containing `text`.
    func waitForConsole(containing text: String, timeout: Duration) async throws -> Bool {
        // Chromium logs console strings quoted: `"MTS rendered [\"Zed\"]"`.
        let escaped = text.replacingOccurrences(of: "\"", with: "\\\"")
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let output = log.text
            if output.contains(text) || output.contains(escaped) { return true }
            if !process.isRunning { return false }
            try await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: profile)
    }

    /// Runs chromium once (`--dump-dom`, `--screenshot`), returns its stdout.
    static func run(_ chromium: URL, _ arguments: [String], url: String) throws -> String {
        let profile = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: profile) }
        let process = Process()
        process.executableURL = chromium
        process.arguments = baseArguments + ["--user-data-dir=\(profile.path)"] + arguments + [url]
        let output = OutputBuffer()
        let pipe = Pipe()
        pipe.fileHandleForReading.readabilityHandler = { handle in output.append(handle.availableData) }
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Bounded: a browser that hangs fails the test instead of blocking it.
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate(); process.waitUntilExit() }
        pipe.fileHandleForReading.readabilityHandler = nil
        output.append(pipe.fileHandleForReading.readDataToEndOfFile())
        return output.text
    }
}
