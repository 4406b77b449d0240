import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// Requests a client crafts to break the server rather than use it
/// (security review 3, `http_hardening.py`): framing that two HTTP parsers
/// could read differently, bodies that are not the JSON they claim, names
/// no keyboard types, tenant ids and paths that try to leave their tenant.
/// Each is refused, or stored as given, and the server keeps serving.
@Suite struct HostileRequestTests {
    /// Sends `body` as is (not always UTF-8, not always JSON) to `path`.
    private static func post(_ server: ServerProcess, _ path: String, bytes body: [UInt8], token: String) async throws -> Int {
        var request = HTTPClientRequest(url: server.baseURL + path)
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        _ = try await response.body.collect(upTo: 1 << 20)
        return Int(response.status.code)
    }

    /// `{"key":"value",…}`, escaped by JSONEncoder (NUL, quotes, backslashes).
    private static func json(_ object: [String: String]) throws -> String {
        String(decoding: try JSONEncoder().encode(object), as: UTF8.self)
    }

    /// A request whose framing is ambiguous (Content-Length and
    /// Transfer-Encoding together, two lengths, a malformed or folded
    /// header, bare LF line ends) gets one 400 and nothing more: the bytes
    /// after it, a second request a proxy would not see, are never run.
    @Test func ambiguousFramingIsOneBadRequestAndNothingIsSmuggled() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data) { server, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            let auth = "Authorization: Bearer \(token)\r\n"
            func smuggled(_ label: String) -> String {
                let body = #"{"name":"Smuggled-\#(label)"}"#
                return "POST /tenants/acme/players HTTP/1.1\r\nHost: x\r\n\(auth)Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            }
            let head = "POST /tenants/acme/players HTTP/1.1\r\nHost: x\r\n\(auth)"
            let cases: [(label: String, bytes: String)] = [
                ("CL+TE", head + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled("CL+TE")),
                ("TE+CL", head + "Transfer-Encoding: chunked\r\nContent-Length: 60\r\n\r\n0\r\n\r\n" + smuggled("TE+CL")),
                ("dup-CL", head + "Content-Length: 0\r\nContent-Length: 40\r\n\r\n" + smuggled("dup-CL")),
                ("TE-space", head + "Transfer-Encoding : chunked\r\nContent-Length: 0\r\n\r\n" + smuggled("TE-space")),
                ("TE-identity", head + "Transfer-Encoding: identity, chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n" + smuggled("TE-identity")),
                ("obs-fold", head + "X-A: a\r\n chunked\r\nContent-Length: 0\r\n\r\n" + smuggled("obs-fold")),
                ("bare-LF", (head + "Content-Length: 0\r\n\r\n").replacingOccurrences(of: "\r\n", with: "\n") + smuggled("bare-LF")),
            ]
            for (label, bytes) in cases {
                let connection = try RawConnection(port: server.port)
                try connection.send(bytes)
                let (closed, text) = connection.read(timeout: .seconds(10))
                let statuses = text.components(separatedBy: "\r\n").filter { $0.hasPrefix("HTTP/1.1 ") }
                #expect(statuses == ["HTTP/1.1 400 Bad Request"], "\(label): \(text)")
                #expect(closed, "\(label): the connection stayed open after a request it could not frame")
            }
            let players = try await api.send(.GET, "/tenants/acme/players", token: token)
            #expect(players.status == 200)
            #expect(try players.json([PlayerJSON].self).isEmpty, "\(players.body)")
        }
    }

    /// Bodies that are not a player, however broken or deep, get 400; a
    /// body over the limit gets 413; none reaches the tenant's file or
    /// costs the server more than that answer.
    @Test func bodiesThatAreNotAPlayerAreRefusedWithoutHarm() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data) { server, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            let bodies: [(label: String, bytes: [UInt8])] = [
                ("truncated", Array(#"{"name": "a"#.utf8)),
                ("binary", [0x00, 0xff, 0xfe]),
                ("array", Array("[1,2]".utf8)),
                ("deep array", Array((String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)).utf8)),
                ("deep object", Array((String(repeating: #"{"a":"#, count: 50_000) + "1" + String(repeating: "}", count: 50_000)).utf8)),
                ("huge number", Array(#"{"name":"n","score":1e999999}"#.utf8)),
                ("integer overflow", Array(#"{"name":"n","score":99999999999999999999999}"#.utf8)),
                ("invalid UTF-8", [UInt8](#"{"name":""#.utf8) + [0xc3, 0x28] + [UInt8](#""}"#.utf8)),
            ]
            for (label, bytes) in bodies {
                let status = try await Self.post(server, "/tenants/acme/players", bytes: bytes, token: token)
                #expect(status == 400, "\(label): \(status)")
            }
            // Over the 2 MiB limit. The server may answer before it has read
            // the whole body, and close: the client then sees the 413 or a
            // closed connection, never a created player.
            let big = Array(#"{"name":""#.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 3 << 20) + Array(#""}"#.utf8)
            let status = try? await Self.post(server, "/tenants/acme/players", bytes: big, token: token)
            #expect(status == 413 || status == nil, "3 MiB body: \(status.map { "\($0)" } ?? "closed")")
            #expect(try await api.send(.GET, "/health/live").status == 200)
            #expect(try await api.send(.GET, "/tenants/acme/players", token: token).json([PlayerJSON].self).isEmpty)
            #expect(!server.outputText.contains("status=5"), "\(server.outputText)")
        }
    }

    /// Names no keyboard types (a right-to-left override, a byte-order
    /// mark, combining marks, emoji, markup) are data: each is stored and
    /// read back exactly as sent. A name with a NUL, which SQLite would
    /// give back cut at the NUL, is refused with 400 and stores nothing.
    @Test func unusualNamesAreStoredAndReadBackAsSent() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data) { _, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            let names = ["\u{202E}evil", String(repeating: "\u{1F600}", count: 30), "e\u{301}", "\u{FEFF}bom", "<script>alert(1)</script>"]
            for name in names {
                let reply = try await api.send(.POST, "/tenants/acme/players", json: try Self.json(["name": name, "team": "u"]), token: token)
                #expect(reply.status == 201, "\(name.unicodeScalars.map { String($0.value, radix: 16) }): \(reply.body)")
            }
            for name in ["a\u{0}b", "\u{0}"] {
                let reply = try await api.send(.POST, "/tenants/acme/players", json: try Self.json(["name": name]), token: token)
                #expect(reply.status == 400, "\(name.debugDescription): \(reply.status) \(reply.body)")
                #expect(reply.body.contains("NUL"), "\(reply.body)")
            }
            let stored = try await api.send(.GET, "/tenants/acme/players", token: token).json([PlayerJSON].self).map(\.name)
            // Compared scalar by scalar: String's == would equate "e\u{301}" and "é".
            #expect(Set(stored.map { Array($0.unicodeScalars) }) == Set(names.map { Array($0.unicodeScalars) }), "\(stored)")
        }
    }

    /// Tenant ids outside `[a-z0-9_-]{1,64}` (paths, encodings of paths,
    /// look-alike letters, spaces, `.` and `..`) are refused at creation;
    /// request paths that try to reach another tenant through encodings
    /// or `..` get 404, never its rows.
    @Test func tenantIDsAndPathsCantLeaveTheirTenant() async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let data = root.appendingPathComponent("data")
        try await withTestServer(dataDirectory: data) { server, api in
            let acme = try await api.createTenant(#"{"id":"acme"}"#)
            let bravo = try await api.createTenant(#"{"id":"bravo"}"#)
            #expect(try await api.send(.POST, "/tenants/bravo/players", json: #"{"name":"Bravo-only-row"}"#, token: bravo).status == 201)
            for id in ["../x", "..", ".", "a/b", "ACME", "acme ", "a%2Fb", "%2e%2e", "\u{430}cme", String(repeating: "a", count: 65), "", "a\\b", "-", "_", "a\u{0}b"] {
                let reply = try await api.send(.POST, "/tenants", json: try Self.json(["id": id]), token: ServerProcess.operatorToken)
                #expect(reply.status == 400, "\(id.debugDescription): \(reply.status) \(reply.body)")
            }
            // Nothing was made for them, in the data folder or beside it.
            #expect(try FileManager.default.contentsOfDirectory(atPath: root.path) == ["data"])
            let tenantFiles = try FileManager.default.contentsOfDirectory(atPath: data.appendingPathComponent("tenants").path)
            #expect(tenantFiles.allSatisfy { $0.hasPrefix("acme.sqlite") || $0.hasPrefix("bravo.sqlite") }, "\(tenantFiles)")
            let dataFiles = try FileManager.default.contentsOfDirectory(atPath: data.path)
            #expect(!dataFiles.contains { $0.hasPrefix("x.") }, "\(dataFiles)")

            // Request targets sent byte for byte (an HTTP client library
            // would normalize some), with acme's token.
            for target in ["/tenants/..%2Facme/players", "/tenants/%2e%2e/players", "/tenants/acme/../bravo/players",
                           "/tenants/acme%00/players", "/tenants/ACME/players", "/tenants/acme/players/..%2F..%2Fbravo",
                           "/tenants/acme/players/../../bravo/players", "/tenants/%62ravo/players", "/tenants/bravo/players"] {
                let connection = try RawConnection(port: server.port)
                try connection.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(acme)\r\nConnection: close\r\n\r\n")
                let text = connection.read(timeout: .seconds(10)).text
                #expect(text.hasPrefix("HTTP/1.1 404") || text.hasPrefix("HTTP/1.1 400"), "\(target): \(text)")
                #expect(!text.contains("Bravo-only-row"), "\(target): \(text)")
            }
        }
    }
}
