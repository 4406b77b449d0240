import Foundation

/// Where a key comes from: an environment variable or a file. Never the
/// configuration file, never the command line (arguments are visible to
/// every user through `ps`).
///
/// In a configuration file: `{"env": "PLAYERS_KEY"}` or
/// `{"file": "secrets/players.key"}` (see the Configuration article of
/// GRDBMigrations).
///
/// ```swift
/// let secret = try KeySource.environment("PLAYERS_KEY").read()
/// var configuration = Configuration()
/// try configuration.encrypt(with: CipherKey(secret))
/// ```
///
/// What the secret means is up to its user: ``CipherKey/init(_:)`` takes a
/// database key (a passphrase, or a raw key `x'<64 hex digits>'`),
/// ``TenantMasterKey/init(_:)`` a tenant master key.
///
/// ## Topics
///
/// ### Sources
///
/// - ``environment(_:)``
/// - ``file(_:)``
///
/// ### Reading the secret
///
/// - ``read(environment:)``
/// - ``DatabaseSecret``
/// - ``KeySourceError``
///
/// ### Child processes
///
/// - ``childEnvironment(_:removingKeysOf:)``
public enum KeySource: Sendable, Hashable, CustomStringConvertible {
    /// The key is the value of this environment variable.
    case environment(String)
    /// The key is the content of this file, read as bytes; one final
    /// newline (`\n` or `\r\n`), which editors and `echo` add, is not part of it.
    case file(String)

    /// Reads the secret.
    ///
    /// A key file must be accessible to its owner only (mode 0600 or
    /// 0400): one that its group or other users can read or write is
    /// refused with ``KeySourceError/accessibleToOthers(path:mode:)``,
    /// unread.
    ///
    /// - throws: ``KeySourceError``, saying what to fix.
    public func read(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> DatabaseSecret {
        switch self {
        case .environment(let name):
            guard let value = environment[name], !value.isEmpty else {
                throw KeySourceError.environmentVariableNotSet(name)
            }
            return DatabaseSecret(bytes: Self.trimmingFinalNewline(Data(value.utf8)))
        case .file(let path):
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                throw KeySourceError.unreadableFile(path: path, reason: String(cString: strerror(errno)))
            }
            let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            // The mode of the file read, not of a path that could change
            // in between. Any access for the group or others is refused.
            var status = stat()
            guard fstat(descriptor, &status) == 0 else {
                throw KeySourceError.unreadableFile(path: path, reason: String(cString: strerror(errno)))
            }
            let mode = status.st_mode & 0o777
            if mode & 0o077 != 0 {
                throw KeySourceError.accessibleToOthers(path: path, mode: Int(mode))
            }
            let data: Data
            do {
                data = try handle.readToEnd() ?? Data()
            } catch {
                throw KeySourceError.unreadableFile(path: path, reason: (error as NSError).localizedDescription)
            }
            let bytes = Self.trimmingFinalNewline(data)
            guard !bytes.isEmpty else { throw KeySourceError.emptyFile(path: path) }
            return DatabaseSecret(bytes: bytes)
        }
    }

    /// The problem that ``read(environment:)`` would throw, without keeping
    /// the secret: for the configuration loader, which lists every problem
    /// of a file at once. Package-only: elsewhere, `read` and a `catch`
    /// say the same.
    package func problem(environment: [String: String] = ProcessInfo.processInfo.environment) -> KeySourceError? {
        do {
            _ = try read(environment: environment)
            return nil
        } catch let error as KeySourceError {
            return error
        } catch {
            return .unreadableFile(path: "\(self)", reason: "\(error)")
        }
    }

    private static func trimmingFinalNewline(_ data: Data) -> Data {
        var data = data
        if data.last == UInt8(ascii: "\n") { data.removeLast() }
        if data.last == UInt8(ascii: "\r") { data.removeLast() }
        return data
    }

    public var description: String {
        switch self {
        case .environment(let name): return "environment variable \(name)"
        case .file(let path): return "key file \(path)"
        }
    }
}

/// A key could not be read from its ``KeySource``.
///
/// ```swift
/// do { _ = try KeySource.environment("MISSING").read() }
/// catch let error as KeySourceError { print(error) }
/// ```
public enum KeySourceError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The variable is not set, or empty.
    case environmentVariableNotSet(String)
    /// The key file could not be read.
    case unreadableFile(path: String, reason: String)
    /// The key file is empty, or holds only a newline.
    case emptyFile(path: String)
    /// The key file's mode lets its group or other users read or write it
    /// (`mode`, the permission bits): it is refused, unread.
    case accessibleToOthers(path: String, mode: Int)

    public var description: String {
        switch self {
        case .environmentVariableNotSet(let name):
            return "environment variable \(name) is not set or empty: export the key in it"
        case .unreadableFile(let path, let reason):
            return "cannot read key file \(path): \(reason)"
        case .emptyFile(let path):
            return "key file \(path) is empty: write the key in it"
        case .accessibleToOthers(let path, let mode):
            return "key file \(path) has mode \(String(mode, radix: 8)), so its group or other users can read or change it: "
                + "make it readable by its owner only (chmod 600 \(path)), and replace the key if others may have read it"
        }
    }
}
