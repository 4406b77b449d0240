import Foundation

/// A real S3-compatible server for the tests: moto's `moto_server` (from
/// the venv of scripts/bootstrap) on a free loopback port, checking
/// request signatures, with an IAM user whose access key the tests sign
/// with and buckets made ready. Stopped by ``stop()`` or when released.
///
/// Nothing looks beyond loopback: the server gets
/// `AWS_EC2_METADATA_DISABLED=true`, and clients get ``endpoint`` and
/// ``environment`` (explicit endpoint, region and credentials).
///
/// ```swift
/// let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
/// defer { moto.stop() }
/// let endpoint = moto.endpoint // http://127.0.0.1:PORT
/// ```
public final class MotoServer {
    /// `http://127.0.0.1:PORT`.
    public let endpoint: URL
    /// The access key of the server's IAM user, which may do anything.
    public let accessKeyID: String
    /// Its secret.
    public let secretAccessKey: String
    /// The region the buckets were made in.
    public let region = "us-east-1"
    private let child: RunningChildProcess
    private var stopped = false

    /// The `moto_server` of the venv.
    public static let executable = repositoryRoot.appendingPathComponent(".build-venv/bin/moto_server").path

    /// Starts a server whose `buckets` exist; throws ``MissingOracle`` if
    /// scripts/bootstrap didn't install moto.
    public init(buckets: [String]) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else {
            throw MissingOracle(path: Self.executable, install: "pip install moto[server]==5.2.5")
        }
        let port = try freeLoopbackPort()
        // The first actions are the setup's own (an IAM user, its key and
        // policy, the buckets), unsigned; every later request must carry
        // a valid signature of that user's key.
        let setupActions = 3 + buckets.count
        child = try RunningChildProcess(
            executable: Self.executable, arguments: ["-H", "127.0.0.1", "-p", String(port)],
            environment: ["AWS_EC2_METADATA_DISABLED": "true", "INITIAL_NO_AUTH_ACTION_COUNT": String(setupActions)],
            mergingOutput: true)
        guard let endpoint = URL(string: "http://127.0.0.1:\(port)") else {
            kill(child.process.processIdentifier, SIGKILL)
            throw MotoStartFailure(output: "no URL for port \(port)")
        }
        self.endpoint = endpoint
        // Blocking: this initializer runs on a thread of its own.
        let setup = try RunningChildProcess(
            executable: venvPython, arguments: [Self.setupScript, endpoint.absoluteString, "tests"] + buckets,
            environment: ["AWS_EC2_METADATA_DISABLED": "true"], mergingOutput: true
        ).waitBlocking()
        let words = setup.stdout.split(whereSeparator: \.isWhitespace).map(String.init)
        guard setup.status == 0, words.count >= 2, let keyID = words.dropLast().last, let secret = words.last else {
            kill(child.process.processIdentifier, SIGKILL)
            throw MotoStartFailure(output: setup.stdout + child.stderrSoFar)
        }
        accessKeyID = keyID
        secretAccessKey = secret
    }

    deinit { stop() }

    /// The variables AWS's SDKs and CLI read, for a child process (such as
    /// Litestream) that talks to this server.
    public var environment: [String: String] {
        [
            "AWS_ACCESS_KEY_ID": accessKeyID, "AWS_SECRET_ACCESS_KEY": secretAccessKey,
            "AWS_REGION": region, "AWS_ENDPOINT_URL": endpoint.absoluteString, "AWS_EC2_METADATA_DISABLED": "true",
        ]
    }

    /// Stops the server. With SIGKILL: moto_server's SIGTERM handler
    /// doesn't end its Werkzeug loop (5.2.5), and it keeps nothing to save.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        kill(child.process.processIdentifier, SIGKILL)
        child.process.waitUntilExit()
    }

    /// Waits for the port, then makes the IAM user, its key and policy and
    /// the buckets, and prints the key ID and secret last (shared with
    /// scripts/fleet-chaos).
    private static let setupScript = repositoryRoot.appendingPathComponent("scripts/moto-setup.py").path
}

/// moto_server did not start, or its setup failed.
public struct MotoStartFailure: Error, CustomStringConvertible {
    public var output: String
    public var description: String { "moto_server did not start: \(output)" }
}

/// A loopback TCP port that was free a moment ago (the kernel's pick for
/// port 0), for a child server to listen on.
public func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
            bind(fd, socketAddress, length) == 0 && getsockname(fd, socketAddress, &length) == 0
        }
    }
    guard bound else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    return Int(UInt16(bigEndian: address.sin_port))
}
