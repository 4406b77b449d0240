import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A headless chromium driven over the Chrome DevTools Protocol through
/// `--remote-debugging-pipe` (file descriptors 3 and 4, NUL-terminated
/// JSON messages): no WebSocket client needed. Its stderr (with the page's
/// console when `--enable-logging=stderr`) is kept.
final class DevToolsBrowser: Sendable {
    private let pid: pid_t
    private let toBrowser: Int32
    private let profile: URL
    private let log: OutputBuffer
    private let state = Replies()
    /// Kept: its readability handler feeds `log`.
    private let logHandle: FileHandle

    /// The answers read from chromium, by command id.
    final class Replies: Sendable {
        struct State {
            var nextID = 1
            var replies: [Int: Data] = [:]
            var closed = false
        }
        private let state = Mutex(State())
        func withLock<T>(_ body: (inout State) -> T) -> T { state.withLock { body(&$0) } }
    }

    var output: String { log.text }

    static func launch(_ chromium: URL, url: String) throws -> DevToolsBrowser {
        var toChild: [Int32] = [0, 0], fromChild: [Int32] = [0, 0], logPipe: [Int32] = [0, 0]
        // Close-on-exec: the child gets only the descriptors dup2'ed below.
        func makePipe(_ fds: inout [Int32]) throws {
            guard pipe(&fds) == 0, fcntl(fds[0], F_SETFD, FD_CLOEXEC) == 0, fcntl(fds[1], F_SETFD, FD_CLOEXEC) == 0 else {
                throw ServerError(message: "pipe failed: \(errno)")
            }
        }
        try makePipe(&toChild)
        try makePipe(&fromChild)
        try makePipe(&logPipe)
        let profile = temporaryTestDirectory()
        let arguments = [chromium.path] + Browser.baseArguments + [
            "--user-data-dir=\(profile.path)", "--remote-debugging-pipe", "--enable-logging=stderr", "--v=0",
            "--window-size=900,700", url,
        ]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec: the child keeps exactly 3 and 4 (and its stdio).
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 3)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 4)
        posix_spawn_file_actions_adddup2(&actions, logPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, logPipe[1], 2)
        var pid: pid_t = 0
        let cArguments = arguments.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        let status = posix_spawn(&pid, chromium.path, &actions, nil, cArguments, environ)
        close(toChild[0]); close(fromChild[1]); close(logPipe[1])
        guard status == 0 else { throw ServerError(message: "posix_spawn \(chromium.path) failed: \(status)") }
        return DevToolsBrowser(pid: pid, toBrowser: toChild[1], fromBrowser: fromChild[0], logFD: logPipe[0], profile: profile)
    }

    private init(pid: pid_t, toBrowser: Int32, fromBrowser: Int32, logFD: Int32, profile: URL) {
        self.pid = pid
        self.toBrowser = toBrowser
        self.profile = profile
        let log = OutputBuffer()
        self.log = log
        logHandle = FileHandle(fileDescriptor: logFD, closeOnDealloc: true)
        logHandle.readabilityHandler = { handle in log.append(handle.availableData) }
        let state = self.state
        let reader = Thread {
            var pending = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = read(fromBrowser, &buffer, buffer.count)
                if count <= 0 { break }
                pending += buffer[0..<count]
                while let end = pending.firstIndex(of: 0) {
                    let message = Data(pending[..<end])
                    pending.removeSubrange(...end)
                    // Events have no id: only answers are kept.
                    guard let json = try? JSONSerialization.jsonObject(with: message) as? [String: Any],
                          let id = json["id"] as? Int else { continue }
                    state.withLock { $0.replies[id] = message }
                }
            }
            close(fromBrowser)
            state.withLock { $0.closed = true }
        }
        reader.start()
    }

    /// Sends a DevTools command; returns its `result` (or throws its `error`).
    func send(_ method: String, _ params: [String: Any] = [:], session: String? = nil, timeout: Duration = .seconds(30)) async throws -> [String: Any] {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        var message: [String: Any] = ["id": id, "method": method, "params": params]
        if let session { message["sessionId"] = session }
        var bytes = [UInt8](try JSONSerialization.data(withJSONObject: message))
        bytes.append(0)
        let written = bytes.withUnsafeBytes { write(toBrowser, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw ServerError(message: "cannot write to chromium (\(errno)):\n\(output)") }
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let (reply, closed) = state.withLock { state in (state.replies.removeValue(forKey: id), state.closed) }
            if let raw = reply {
                let json = try JSONSerialization.jsonObject(with: raw) as? [String: Any] ?? [:]
                if let error = json["error"] { throw ServerError(message: "\(method): \(error)") }
                return json["result"] as? [String: Any] ?? [:]
            }
            if closed { throw ServerError(message: "chromium closed its pipe:\n\(output)") }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw ServerError(message: "\(method): no answer within \(timeout)")
    }

    /// Attaches to the page; returns the session of later commands.
    func attachToPage() async throws -> String {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let targets = try await send("Target.getTargets")["targetInfos"] as? [[String: Any]] ?? []
            if let page = targets.first(where: { $0["type"] as? String == "page" }), let id = page["targetId"] as? String {
                let attached = try await send("Target.attachToTarget", ["targetId": id, "flatten": true])
                if let session = attached["sessionId"] as? String { return session }
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw ServerError(message: "no page target:\n\(output)")
    }

    /// Evaluates `expression` in the page (awaiting a promise); returns its
    /// value as a string.
    func evaluate(_ expression: String, session: String) async throws -> String {
        let result = try await send("Runtime.evaluate", ["expression": expression, "awaitPromise": true, "returnByValue": true], session: session)
        if let exception = result["exceptionDetails"] { throw ServerError(message: "page exception: \(exception)") }
        let value = (result["result"] as? [String: Any])?["value"]
        return value.map { "\($0)" } ?? ""
    }

    /// Evaluates `expression` once the page has loaded: an evaluation that
    /// races the navigation ("Execution context was destroyed") is retried.
    func evaluateAfterLoad(_ expression: String, session: String) async throws -> String {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            do {
                return try await evaluate(expression, session: session)
            } catch let error as ServerError where error.message.contains("context") && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// Saves a PNG screenshot of the page.
    func screenshot(to file: URL, session: String) async throws {
        let result = try await send("Page.captureScreenshot", ["format": "png"], session: session)
        guard let base64 = result["data"] as? String, let png = Data(base64Encoded: base64) else {
            throw ServerError(message: "no screenshot data")
        }
        try png.write(to: file)
    }

    func stop() {
        close(toBrowser)
        kill(pid, SIGTERM)
        logHandle.readabilityHandler = nil
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        try? FileManager.default.removeItem(at: profile)
    }
}
