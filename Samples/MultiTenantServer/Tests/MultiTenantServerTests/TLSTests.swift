import Foundation
import Testing

/// The server's TLS from outside (security review 3, `tls_check.py`):
/// what `openssl s_client` can negotiate with it, and which `--host`
/// values count as loopback, where plain HTTP is allowed.
@Suite struct TLSTests {
    /// Makes a self-signed certificate for 127.0.0.1 and its key in `folder`.
    static func selfSignedCertificate(in folder: URL) async throws -> (certificate: URL, key: URL) {
        let certificate = folder.appendingPathComponent("cert.pem"), key = folder.appendingPathComponent("key.pem")
        let made = try await runToEnd(URL(fileURLWithPath: "/usr/bin/openssl"), [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key.path, "-out", certificate.path,
        ])
        guard made.status == 0 else { throw ServerError(message: "openssl req: \(made.output)") }
        return (certificate, key)
    }

    /// `openssl s_client` against `port` with `options`, its input empty:
    /// what it printed about the handshake.
    static func handshake(port: Int, _ options: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_client", "-connect", "127.0.0.1:\(port)", "-brief"] + options
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return text
    }

    /// TLS 1.2 and 1.3 only: a client that offers TLS 1.0 or 1.1 (with
    /// every cipher suite it has, so that the refusal is the server's) gets
    /// the server's `protocol_version` alert.
    @Test func onlyTLS12And13AreNegotiated() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        let pair = try await Self.selfSignedCertificate(in: data)
        let server = try await ServerProcess.launch(
            executable: URL(fileURLWithPath: try ServerProcess.executablePath()),
            arguments: ["--port", "0", "--data", data.appendingPathComponent("data").path, "--tls-cert", pair.certificate.path, "--tls-key", pair.key.path],
            environment: ["MTS_OPERATOR_TOKEN": ServerProcess.operatorToken])
        defer { if server.process.isRunning { kill(server.process.processIdentifier, SIGKILL) } }
        for (option, version) in [("-tls1_2", "TLSv1.2"), ("-tls1_3", "TLSv1.3")] {
            let text = try Self.handshake(port: server.port, [option])
            #expect(text.contains("Protocol version: \(version)"), "\(option): \(text)")
        }
        for option in ["-tls1", "-tls1_1"] {
            let text = try Self.handshake(port: server.port, [option, "-cipher", "DEFAULT:@SECLEVEL=0"])
            #expect(!text.contains("Protocol version:") && !text.contains("CONNECTION ESTABLISHED"), "\(option): \(text)")
            #expect(text.contains("alert protocol version"), "\(option): the refusal is not the server's: \(text)")
        }
        #expect(try await server.stop() == 0)
    }

    /// `--host` values that are not loopback, however they are spelled
    /// (the unspecified addresses, another address, an IPv4-mapped IPv6
    /// loopback, hexadecimal or decimal forms, a trailing dot), stop the
    /// start without TLS, before anything is bound or written.
    @Test func plainHTTPOffLoopbackIsRefusedHoweverTheHostIsSpelled() async throws {
        let executable = URL(fileURLWithPath: try ServerProcess.executablePath())
        for host in ["::", "0.0.0.0", "192.0.2.1", "::ffff:127.0.0.1", "0x7f000001", "2130706433", "127.1", "localhost.", "[::]"] {
            let data = temporaryTestDirectory()
            defer { try? FileManager.default.removeItem(at: data) }
            let error = await #expect(throws: ServerError.self, "\(host)") {
                let server = try await ServerProcess.launch(
                    executable: executable, arguments: ["--host", host, "--port", "0", "--data", data.path],
                    environment: ["MTS_OPERATOR_TOKEN": ServerProcess.operatorToken])
                _ = try? await server.stop(signal: SIGKILL)
            }
            #expect(error?.message.contains("--host \(host) is not a loopback address") == true, "\(host): \(error?.message ?? "")")
            #expect(error?.message.contains("listening on") == false, "\(host)")
            #expect(!FileManager.default.fileExists(atPath: data.path), "\(host): the data folder was made")
        }
    }
}
