import Foundation
import GRDBCipher

/// What a backup directory holds: `manifest.json`, written last, once
/// every file it lists is durable. A directory without it is not a backup.
///
/// ```json
/// {
///   "format": 1,
///   "tool": "GRDBBackup 1",
///   "createdAt": "2026-11-23T13:00:00Z",
///   "files": [
///     { "kind": "tenant", "name": "acme", "path": "tenants/acme.sqlite",
///       "size": 20480, "sha256": "9f2c…", "createdAt": "2026-11-23T13:00:00Z",
///       "encryption": { "compatibility": 4, "pageSize": 4096, "reserveBytes": 80, "plaintextHeaderSize": 0 },
///       "migrations": [ { "identifier": "0001_create_player.sql", "checksum": "5d1e…" } ] }
///   ]
/// }
/// ```
///
/// Key material never appears in a manifest: `encryption` holds the cipher
/// settings SQLCipher needs to be told, nothing more.
///
/// ```swift
/// let manifest = try BackupManifest.read(fromDirectory: URL(fileURLWithPath: "backups/2026-11-23"))
/// for entry in manifest.files { print(entry.kind, entry.name, entry.size) }
/// ```
///
/// ## Topics
///
/// ### Reading a manifest
///
/// - ``read(fromDirectory:)``
/// - ``entry(_:named:)``
/// - ``fileName``
///
/// ### Contents
///
/// - ``files``
/// - ``BackupEntry``
/// - ``createdAt``
/// - ``tool``
/// - ``format``
/// - ``currentFormat``
/// - ``defaultTool``
/// - ``init(format:tool:createdAt:files:)``
public struct BackupManifest: Codable, Sendable, Equatable {
    /// The manifest's file name in a backup directory.
    public static let fileName = "manifest.json"
    /// The manifest format this version writes and reads. A newer format
    /// is refused: its fields might change what a restore must check.
    public static let currentFormat = 1
    /// The `tool` of manifests written by this library, unless told otherwise.
    public static let defaultTool = "GRDBBackup \(currentFormat)"

    /// The manifest format.
    public var format: Int
    /// The program (and version) that made the backup.
    public var tool: String
    /// When the backup started.
    public var createdAt: Date
    /// The databases, in the order they were added.
    public var files: [BackupEntry]

    /// Creates a manifest; ``BackupSet/finish()`` writes them.
    ///
    /// ```swift
    /// let manifest = BackupManifest(createdAt: Date(), files: [])
    /// ```
    public init(format: Int = BackupManifest.currentFormat, tool: String = BackupManifest.defaultTool, createdAt: Date, files: [BackupEntry]) {
        self.format = format
        self.tool = tool
        self.createdAt = createdAt
        self.files = files
    }

    /// Reads and checks the manifest of the backup in `directory`: a known
    /// format, and relative file paths inside the directory.
    ///
    /// - throws: ``BackupError/manifestMissing(directory:)``,
    ///   ``BackupError/manifestInvalid(path:reason:)``.
    public static func read(fromDirectory directory: URL) throws -> BackupManifest {
        let url = directory.appendingPathComponent(fileName)
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw BackupError.manifestMissing(directory: directory.path)
        }
        let manifest: BackupManifest
        do {
            manifest = try decoder.decode(BackupManifest.self, from: Data(contentsOf: url))
        } catch {
            throw BackupError.manifestInvalid(path: url.path, reason: "\(error)")
        }
        guard manifest.format == currentFormat else {
            throw BackupError.manifestInvalid(path: url.path, reason: "manifest format \(manifest.format), and this version reads format \(currentFormat) only")
        }
        var seen = Set<String>()
        for entry in manifest.files {
            let components = entry.path.split(separator: "/", omittingEmptySubsequences: false)
            guard !entry.path.hasPrefix("/"), !components.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) else {
                throw BackupError.manifestInvalid(path: url.path, reason: "file path \(String(reflecting: entry.path)) is not inside the backup directory")
            }
            guard seen.insert(entry.id).inserted else {
                throw BackupError.manifestInvalid(path: url.path, reason: "\(entry.id) is listed twice")
            }
        }
        return manifest
    }

    /// The entry of a database or tenant.
    public func entry(_ kind: BackupEntry.Kind, named name: String) throws -> BackupEntry {
        guard let entry = files.first(where: { $0.kind == kind && $0.name == name }) else {
            throw BackupError.noSuchEntry(name: "\(kind.rawValue) \(name)", available: files.map(\.id))
        }
        return entry
    }

    /// Now, to the second: what the manifest's ISO 8601 dates hold, so
    /// that a manifest read back equals the one written.
    static func now() -> Date {
        Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }()

    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }()
}

/// One database file of a backup.
///
/// ```swift
/// let entry = try manifest.entry(.tenant, named: "acme")
/// print(entry.path, entry.sha256, entry.encryption != nil)
/// ```
public struct BackupEntry: Codable, Sendable, Equatable {
    /// What the file is the copy of.
    public enum Kind: String, Codable, Sendable {
        /// A named database of the configuration.
        case database
        /// A tenant of the tenants directory.
        case tenant
    }

    /// The cipher settings of an encrypted copy (never its key).
    public struct Encryption: Codable, Sendable, Equatable {
        /// SQLCipher's major version (3 or 4).
        public var compatibility: Int
        /// `cipher_page_size`.
        public var pageSize: Int
        /// Bytes reserved per page for IV and HMAC.
        public var reserveBytes: Int
        /// PBKDF2 iterations of a passphrase; nil for a raw key.
        public var kdfIterations: Int?
        /// `cipher_plaintext_header_size`.
        public var plaintextHeaderSize: Int

        public init(_ format: CipherFileFormat) {
            compatibility = Int(format.compatibility.rawValue)
            pageSize = format.pageSize
            reserveBytes = format.reserveBytes
            kdfIterations = format.kdfIterations
            plaintextHeaderSize = format.plaintextHeaderSize
        }
    }

    /// An applied migration, and the SHA-256 of its SQL file when it had one.
    public struct Migration: Codable, Sendable, Equatable {
        public var identifier: String
        public var checksum: String?

        public init(identifier: String, checksum: String?) {
            self.identifier = identifier
            self.checksum = checksum
        }
    }

    public var kind: Kind
    /// The database name, or the tenant id.
    public var name: String
    /// The file, relative to the backup directory.
    public var path: String
    /// The file's size in bytes.
    public var size: Int
    /// The SHA-256 of the file, lowercase hex.
    public var sha256: String
    /// When the copy's snapshot was taken.
    public var createdAt: Date
    /// Nil for a plain database.
    public var encryption: Encryption?
    /// The migrations applied in the copy, sorted by identifier.
    public var migrations: [Migration]

    /// `tenant acme`, `database catalog`.
    public var id: String { "\(kind.rawValue) \(name)" }
}
