import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A client of the control socket of a running `litestream replicate`
/// (Litestream 0.5.17): the HTTP API its own `litestream register`,
/// `unregister`, `sync` and `list` commands use, on a Unix socket.
///
/// Requests are HTTP/1.0, so that Litestream's Go server answers with a
/// plain body and closes the connection (no chunked encoding to decode).
/// Calls block: run them off the cooperative thread pool (`BlockingWork`).
///
/// ```swift
/// let control = LitestreamControl(socketPath: "/srv/litestream.sock")
/// try control.register(path: "/srv/tenants/acme.sqlite", replicaURL: "file:///srv/replica/tenants/acme")
/// let synced = try control.sync(path: "/srv/tenants/acme.sqlite", wait: true)
/// ```
package struct LitestreamControl: Sendable {
    /// The control socket (`socket.path` of Litestream's configuration).
    package var socketPath: String
    /// How long a call waits for Litestream.
    package var timeout: Duration

    package init(socketPath: String, timeout: Duration = .seconds(30)) {
        self.socketPath = socketPath
        self.timeout = timeout
    }

    /// The state of a database in the replicator.
    package struct DatabaseStatus: Sendable, Decodable, Equatable {
        package var path: String
        /// `replicating`, `open` or `stopped`.
        package var status: String
        /// When its replica last took a sync round without an error: each
        /// second for an idle database (a round with nothing to upload
        /// sends no request), and no more while uploads fail. Nil before
        /// the first.
        package var lastSyncAt: Date?

        package init(path: String, status: String, lastSyncAt: Date? = nil) {
            self.path = path
            self.status = status
            self.lastSyncAt = lastSyncAt
        }

        enum CodingKeys: String, CodingKey {
            case path, status
            case lastSyncAt = "last_sync_at"
        }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            path = try container.decode(String.self, forKey: .path)
            status = try container.decode(String.self, forKey: .status)
            if let text = try container.decodeIfPresent(String.self, forKey: .lastSyncAt) {
                guard let date = Self.date(rfc3339: text) else {
                    throw DecodingError.dataCorruptedError(forKey: .lastSyncAt, in: container, debugDescription: "not an RFC 3339 time: \(text)")
                }
                lastSyncAt = date
            }
        }

        /// Go's RFC 3339 times carry nanoseconds, beyond the milliseconds
        /// Foundation's ISO 8601 parser takes: the fraction is parsed apart.
        static func date(rfc3339 text: String) -> Date? {
            var whole = Substring(text)
            var fraction = 0.0
            if let dot = text.firstIndex(of: ".") {
                let digits = text[text.index(after: dot)...].prefix { $0.isASCII && $0.isNumber }
                guard !digits.isEmpty, let value = Double("0." + digits) else { return nil }
                fraction = value
                whole = text[..<dot] + text[digits.endIndex...]
            }
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime]
            return formatter.date(from: String(whole)).map { $0.addingTimeInterval(fraction) }
        }
    }

    /// The replicator's process.
    package struct Info: Sendable, Decodable, Equatable {
        package var version: String
        package var pid: Int32
        package var databaseCount: Int

        enum CodingKeys: String, CodingKey {
            case version, pid
            case databaseCount = "database_count"
        }
    }

    /// Starts replicating the database at `path` to `replicaURL`. Litestream
    /// opens it with its own SQLite and creates `_litestream_seq` and
    /// `_litestream_lock` in it. Registering twice does nothing.
    ///
    /// - returns: `registered` or `already_registered`.
    @discardableResult
    package func register(path: String, replicaURL: String) throws -> String {
        struct Response: Decodable { var status: String }
        let body = try JSONSerialization.data(withJSONObject: ["path": path, "replica_url": replicaURL])
        return try decode(Response.self, request("POST", "/register", body: body)).status
    }

    /// Stops replicating the database at `path`, after a last sync of what
    /// Litestream has seen of it.
    ///
    /// - returns: `unregistered` or `already_unregistered`.
    @discardableResult
    package func unregister(path: String) throws -> String {
        struct Response: Decodable { var status: String }
        let body = try JSONSerialization.data(withJSONObject: ["path": path, "timeout": Int(timeout.timeInterval)] as [String: Any])
        return try decode(Response.self, request("POST", "/unregister", body: body)).status
    }

    /// Makes Litestream read the WAL of `path` now and, with `wait`, upload
    /// it before answering.
    package func sync(path: String, wait: Bool) throws -> LitestreamReplicator.SyncResult {
        let body = try JSONSerialization.data(withJSONObject: ["path": path, "wait": wait, "timeout": Int(timeout.timeInterval)] as [String: Any])
        return try decode(LitestreamReplicator.SyncResult.self, request("POST", "/sync", body: body))
    }

    /// The databases of the replicator.
    package func list() throws -> [DatabaseStatus] {
        struct Response: Decodable { var databases: [DatabaseStatus] }
        return try decode(Response.self, request("GET", "/list", body: nil)).databases
    }

    /// The replicator's version, process id and database count.
    package func info() throws -> Info {
        try decode(Info.self, request("GET", "/info", body: nil))
    }

    /// The replicator that listens on the socket, or nil when no process
    /// does: no socket file, or a file no process listens on (what a
    /// killed replicator leaves behind, `ECONNREFUSED`).
    ///
    /// Anything else throws: a listener that does not answer in time, or
    /// not as Litestream does, is still a listener, and taking its socket
    /// for free would start a second replicator on it.
    package func listener() throws -> Info? {
        guard case .answered(let answer) = try exchange("GET", "/info", body: nil) else { return nil }
        return try decode(Info.self, answer)
    }

    // MARK: - HTTP/1.0 on a Unix socket

    private func decode<T: Decodable>(_ type: T.Type, _ body: Data) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: body)
        } catch {
            throw ReplicationError.litestreamRefused(reason: "unexpected answer from \(socketPath): \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
    }

    private func request(_ method: String, _ path: String, body: Data?) throws -> Data {
        switch try exchange(method, path, body: body) {
        case .answered(let answer):
            return answer
        case .nobodyListens(let why):
            throw ReplicationError.controlSocket(path: socketPath, reason: "no litestream replicator listens on it (\(why))")
        }
    }

    private enum Exchange {
        /// The body of a 200 answer.
        case answered(Data)
        /// No process listens on the socket: why (`ENOENT`, `ECONNREFUSED`).
        case nobodyListens(String)
    }

    private func exchange(_ method: String, _ path: String, body: Data?) throws -> Exchange {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ReplicationError.controlSocket(path: socketPath, reason: String(cString: strerror(errno))) }
        defer { close(fd) }

        var seconds = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &seconds, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &seconds, socklen_t(MemoryLayout<timeval>.size))

        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(socketPath.utf8)
        guard pathBytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw ReplicationError.controlSocket(path: socketPath, reason: "path too long for a Unix socket")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
            raw[pathBytes.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let failure = errno
            if failure == ENOENT || failure == ECONNREFUSED { return .nobodyListens(String(cString: strerror(failure))) }
            throw ReplicationError.controlSocket(path: socketPath, reason: String(cString: strerror(failure)))
        }

        var head = "\(method) \(path) HTTP/1.0\r\nHost: localhost\r\n"
        if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n" }
        head += "\r\n"
        try writeAll(fd, Data(head.utf8) + (body ?? Data()))

        var response = Data()
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                throw ReplicationError.controlSocket(path: socketPath, reason: "reading the answer: \(String(cString: strerror(errno)))")
            }
            response.append(contentsOf: buffer[0..<count])
        }
        guard let separator = response.range(of: Data("\r\n\r\n".utf8)),
              let statusLine = String(data: response[..<separator.lowerBound], encoding: .utf8)?.split(separator: "\r\n").first,
              let code = statusLine.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else {
            throw ReplicationError.controlSocket(path: socketPath, reason: "not an HTTP answer")
        }
        let answer = Data(response[separator.upperBound...])
        guard code == 200 else {
            struct Failure: Decodable { var error: String }
            let reason = (try? JSONDecoder().decode(Failure.self, from: answer).error) ?? String(decoding: answer, as: UTF8.self)
            throw ReplicationError.litestreamRefused(reason: "\(method) \(path): \(code) \(reason)")
        }
        return .answered(answer)
    }

    private func writeAll(_ fd: Int32, _ data: Data) throws {
        try data.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            var offset = 0
            while offset < raw.count {
                let written = write(fd, base + offset, raw.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw ReplicationError.controlSocket(path: socketPath, reason: "sending the request: \(String(cString: strerror(errno)))")
                }
                offset += written
            }
        }
    }
}
