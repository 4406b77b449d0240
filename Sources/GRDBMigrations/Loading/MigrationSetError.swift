import Foundation

/// An error that prevents a migration set from loading.
///
/// A set that fails to load applies nothing: every file is checked before any
/// database is touched.
///
/// ```swift
/// do {
///     let set = try MigrationSet(directory: url)
/// } catch let error as MigrationSetError {
///     print(error) // names the file and what to do
/// }
/// ```
public enum MigrationSetError: Error, Equatable, Sendable {
    /// The migrations directory does not exist or is not a directory.
    case directoryNotFound(path: String)
    /// The directory listing could not be read.
    case directoryUnreadable(path: String, reason: String)
    /// A file in the directory is not named `NNNN_description.sql`.
    case invalidFileName(path: String)
    /// An entry of the directory is a folder, not a migration file.
    case unexpectedDirectory(path: String)
    /// A migration file could not be read, or is not UTF-8.
    case unreadableFile(path: String, reason: String)
    /// Two migrations share one number.
    case duplicateNumber(Int, identifiers: [String])
    /// The set declares gaps forbidden and a number is missing.
    case missingNumber(Int, setPath: String)
    /// The `migration-set.json` declaration could not be decoded.
    case invalidDeclaration(path: String, reason: String)
    /// A Swift migration was registered with an invalid description.
    case invalidSwiftMigrationName(String)
}

extension MigrationSetError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .directoryNotFound(let path):
            return "migrations directory not found: \(path). Pass the folder that holds the NNNN_description.sql files."
        case .directoryUnreadable(let path, let reason):
            return "cannot list migrations directory \(path): \(reason). Check its permissions."
        case .invalidFileName(let path):
            return "unexpected file \(path): migration files must be named NNNN_description.sql (digits, underscore, letters/digits/_/-). Rename or remove it."
        case .unexpectedDirectory(let path):
            return "unexpected folder \(path) in a migration set: a set is a flat folder of NNNN_description.sql files. Move it out."
        case .unreadableFile(let path, let reason):
            return "cannot read migration \(path): \(reason). Check its permissions and that it is UTF-8 text."
        case .duplicateNumber(let number, let identifiers):
            return "migration number \(number) is used more than once: \(identifiers.joined(separator: ", ")). Give each migration its own number."
        case .missingNumber(let number, let setPath):
            return "migration number \(number) is missing in \(setPath), and the set forbids gaps (migration-set.json). Add it or renumber the files that were not applied anywhere yet."
        case .invalidDeclaration(let path, let reason):
            return "invalid set declaration \(path): \(reason). Expected JSON like {\"allowsGaps\": false}."
        case .invalidSwiftMigrationName(let name):
            return "invalid Swift migration description \(String(reflecting: name)): use letters, digits, _ and - only."
        }
    }
}
