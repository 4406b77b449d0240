#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// A TCP connection to the server through the socket API, for what an HTTP
/// client library hides: a connection that never sends a request, a
/// partial request, a response read as it comes, the server's close.
final class RawConnection {
    private let descriptor: Int32
    private(set) var received = Data()

    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw ServerError(message: "socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let message = String(cString: strerror(errno))
            close(descriptor)
            throw ServerError(message: "connect: \(message)")
        }
    }

    deinit { close(descriptor) }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { throw ServerError(message: "send: \(String(cString: strerror(errno)))") }
            sent += count
        }
    }

    /// Reads until `done(received)` or the server closes (true) or
    /// `timeout` passes (false).
    @discardableResult
    func read(timeout: Duration, until done: (String) -> Bool = { _ in false }) -> (closed: Bool, text: String) {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let text = String(decoding: received, as: UTF8.self)
            if done(text) { return (false, text) }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return (false, text) }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            let ready = poll(&poller, 1, milliseconds)
            if ready <= 0 { continue }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return (true, String(decoding: received, as: UTF8.self)) }
            received.append(contentsOf: buffer[0..<count])
        }
    }

    /// A request for `path` with a bearer token, kept alive.
    static func request(_ path: String, method: String = "GET", token: String? = nil) -> String {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        if let token { text += "Authorization: Bearer \(token)\r\n" }
        return text + "\r\n"
    }
}
