import AsyncHTTPClient
import Foundation
import GRDBBackup
import GRDBRegistry
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1

/// What travels with a tenant's file, in the `Tenant-Move` header of the
/// import request (base64 of this JSON): the move id, the tenant's catalog
/// row (its token hash, never a token) and the backup manifest of the copy,
/// whose size and SHA-256 the target checks.
struct MoveTransfer: Codable, Sendable {
    static let headerName = "Tenant-Move"
    // A constant, valid field name: the unwrap can't fail.
    static let headerField = HTTPField.Name(headerName)!

    var moveID: String
    var tenant: Tenant
    var manifest: BackupManifest

    /// The manifest's one entry: the tenant `id`, at the path a backup
    /// directory gives it.
    func entry(for id: String) throws -> BackupEntry {
        guard tenant.id == id, manifest.files.count == 1, let entry = manifest.files.first,
              entry.kind == .tenant, entry.name == id, entry.path == "tenants/\(id).\(TenantLayout.fileExtension)"
        else {
            throw MoveTransferError(message: "the \(Self.headerName) header does not describe tenant \(id) alone")
        }
        guard (entry.encryption != nil) == tenant.encrypted else {
            throw MoveTransferError(message: "the catalog row says \(tenant.encrypted ? "encrypted" : "plain") and the manifest does not")
        }
        return entry
    }

    func encodedHeader() throws -> String {
        try Self.encoder.encode(self).base64EncodedString()
    }

    static func decode(header: String) throws -> MoveTransfer {
        guard let json = Data(base64Encoded: header) else {
            throw MoveTransferError(message: "the \(headerName) header is not base64")
        }
        do {
            return try decoder.decode(MoveTransfer.self, from: json)
        } catch {
            throw MoveTransferError(message: "the \(headerName) header can't be read: \(error)")
        }
    }

    // Seconds since 1970, not ISO 8601: the row's creation date keeps
    // its fraction of a second.
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        return encoder
    }()

    private static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }()
}

struct MoveTransferError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// The target of a move, seen from the source: its import endpoint,
/// called with this server's peer token (never the operator's).
struct MovePeer: Sendable {
    /// What the target says of the tenant, for this move.
    enum ImportState: String, Codable, Sendable {
        /// It has no tenant of that id.
        case absent
        /// It has the tenant, imported by this move.
        case imported
        /// It has a tenant of that id, from elsewhere.
        case present
    }

    struct StateDocument: Codable, Sendable {
        var state: ImportState
    }

    struct Reply: Sendable {
        var status: Int
        /// The `error.message` of a JSON error, or the body.
        var message: String
    }

    let client: HTTPClient
    let base: String
    let token: String
    let tenant: String
    let moveID: String

    private var url: String { "\(base)/admin/tenants/\(tenant)/import?move=\(moveID)" }

    func importState() async throws -> ImportState {
        try await stateRequest(.GET)
    }

    /// Asks the target to drop the tenant if this move imported it.
    func abort() async throws -> ImportState {
        try await stateRequest(.DELETE)
    }

    /// Sends the copy at `file`; throws when no answer came.
    func send(copy file: URL, manifest: BackupManifest, row: Tenant) async throws -> Reply {
        let size = try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int ?? 0
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Content-Type", value: "application/octet-stream")
        request.headers.add(name: MoveTransfer.headerName, value: try MoveTransfer(moveID: moveID, tenant: row, manifest: manifest).encodedHeader())
        request.body = .stream(FileChunks(path: file.path), length: .known(Int64(size)))
        // A minute, plus a second per MiB: a slow link is not a failure.
        let response = try await client.execute(request, timeout: .seconds(60 + Int64(size >> 20)))
        let body = try await response.body.collect(upTo: 1 << 20)
        return Reply(status: Int(response.status.code), message: Self.message(of: body))
    }

    private func stateRequest(_ method: HTTPMethod) async throws -> ImportState {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        let response = try await client.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 20)
        if response.status == .unauthorized || response.status == .forbidden {
            throw MoveTransferError(message: "\(method) \(url) refused this server's peer token (\(response.status.code)): both servers need the same MTS_PEER_TOKEN (or peer.token file)")
        }
        guard response.status == .ok, let document = try? JSONDecoder().decode(StateDocument.self, from: Data(body.readableBytesView)) else {
            throw MoveTransferError(message: "\(method) \(url) answered \(response.status.code): \(Self.message(of: body))")
        }
        return document.state
    }

    private static func message(of body: ByteBuffer) -> String {
        struct ErrorDocument: Decodable {
            struct Detail: Decodable { var message: String }
            var error: Detail
        }
        if let document = try? JSONDecoder().decode(ErrorDocument.self, from: Data(body.readableBytesView)) { return document.error.message }
        return String(buffer: body)
    }
}

/// A file as 64 KiB byte buffers, read as the upload needs them.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let path: String

    struct AsyncIterator: AsyncIteratorProtocol {
        let handle: FileHandle?
        let error: (any Error)?

        mutating func next() async throws -> ByteBuffer? {
            if let error { throw error }
            guard let handle, let data = try handle.read(upToCount: 64 << 10), !data.isEmpty else {
                try? handle?.close()
                return nil
            }
            return ByteBuffer(bytes: data)
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        do {
            return AsyncIterator(handle: try FileHandle(forReadingFrom: URL(fileURLWithPath: path)), error: nil)
        } catch {
            return AsyncIterator(handle: nil, error: error)
        }
    }
}
