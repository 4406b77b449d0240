import Foundation
import GRDB
import GRDBBackup
import GRDBCipher
import GRDBMigrations
import GRDBRegistry

/// What a scenario of the fault matrix saw: the figures of the report, and
/// the problems the test fails on.
struct FaultStatistics {
    var scenario: String
    var iterations: [String: Int] = [:]
    var injected: [String: Int] = [:]
    /// Result codes (or error types) of the failed operations, per fault.
    var errors: [String: [String: Int]] = [:]
    /// Typed errors that do not name the database.
    var unnamed: [String: Int] = [:]
    var untypedErrors: [String] = []
    /// A full disk reported as something else.
    var mislabeled: [String] = []
    var lost: [String] = []
    var corrupt: [String] = []
    var inconsistent: [String] = []
    var unreadable: [String] = []
    var failedButDurable: [String] = []
    /// CipherDatabase.verify rejected the file as the fault left it, yet
    /// the database was sound once opened (its WAL holds the pages).
    var verifyFalseAlarms: [String] = []
    /// One message per error type, for the report.
    var examples: [String: String] = [:]

    init(scenario: String) {
        self.scenario = scenario
    }

    mutating func record(_ kind: FaultKind, injected count: Int) {
        iterations[kind.name, default: 0] += 1
        injected[kind.name, default: 0] += count
    }

    mutating func recordError(_ error: any Error, kind: FaultKind, path: String, name: String? = nil, label: String) {
        var (type, named) = Self.describe(error, path: path)
        if let name, String(describing: error).contains(name) { named = true }
        errors[kind.name, default: [:]][type, default: 0] += 1
        if examples[type] == nil { examples[type] = String(String(describing: error).prefix(300)) }
        if kind.code == ResultCode.SQLITE_FULL.rawValue {
            let isFull = switch error {
            case let error as DatabaseError: error.resultCode == .SQLITE_FULL
            case let error as RepositoryOperationError: error.resultCode == .SQLITE_FULL
            case let MigrationError.storageFailed(_, resultCode, _): resultCode & 0xff == ResultCode.SQLITE_FULL.rawValue
            default: String(describing: error).contains("disk is full")
            }
            if !isFull { mislabeled.append("\(label): \(error)") }
        }
        if type.hasPrefix("untyped") {
            untypedErrors.append("\(label): \(error)")
        } else if !named {
            unnamed[type, default: 0] += 1
        }
    }

    /// The error's type and code, and whether it names the database.
    static func describe(_ error: any Error, path: String) -> (String, Bool) {
        let file = URL(fileURLWithPath: path).lastPathComponent
        let named = String(describing: error).contains(file)
        switch error {
        case let error as DatabaseError:
            return ("DatabaseError \(codeName(error.extendedResultCode.rawValue))", named)
        case let error as RepositoryOperationError:
            return ("RepositoryOperationError.\(error.operation) \(codeName(error.extendedResultCode.rawValue))", named)
        case let error as MigrationError:
            return ("MigrationError.\(Mirror(reflecting: error).children.first?.label ?? "\(error)")", named)
        case is CipherError:
            return ("CipherError", named)
        case let error as InvariantViolation:
            return ("InvariantViolation \(error.invariant)", named)
        case is DatabaseRepositoryError:
            return ("DatabaseRepositoryError", named)
        case let error as BackupError:
            return ("BackupError.\(Mirror(reflecting: error).children.first?.label ?? "\(error)")", named)
        default:
            return ("untyped \(type(of: error))", named)
        }
    }

    static func codeName(_ code: Int32) -> String {
        let names: [Int32: String] = [
            ResultCode.SQLITE_IOERR.rawValue: "SQLITE_IOERR", ResultCode.SQLITE_IOERR_READ.rawValue: "SQLITE_IOERR_READ", ResultCode.SQLITE_IOERR_SHORT_READ.rawValue: "SQLITE_IOERR_SHORT_READ",
            ResultCode.SQLITE_IOERR_WRITE.rawValue: "SQLITE_IOERR_WRITE", ResultCode.SQLITE_IOERR_FSYNC.rawValue: "SQLITE_IOERR_FSYNC", ResultCode.SQLITE_IOERR_TRUNCATE.rawValue: "SQLITE_IOERR_TRUNCATE",
            ResultCode.SQLITE_IOERR_FSTAT.rawValue: "SQLITE_IOERR_FSTAT", ResultCode.SQLITE_IOERR_LOCK.rawValue: "SQLITE_IOERR_LOCK", ResultCode.SQLITE_IOERR_SHMMAP.rawValue: "SQLITE_IOERR_SHMMAP",
            ResultCode.SQLITE_IOERR_DELETE.rawValue: "SQLITE_IOERR_DELETE", ResultCode.SQLITE_FULL.rawValue: "SQLITE_FULL", ResultCode.SQLITE_CANTOPEN.rawValue: "SQLITE_CANTOPEN",
            ResultCode.SQLITE_CORRUPT.rawValue: "SQLITE_CORRUPT", ResultCode.SQLITE_NOTADB.rawValue: "SQLITE_NOTADB", ResultCode.SQLITE_ERROR.rawValue: "SQLITE_ERROR", ResultCode.SQLITE_BUSY.rawValue: "SQLITE_BUSY",
            ResultCode.SQLITE_READONLY.rawValue: "SQLITE_READONLY", ResultCode.SQLITE_MISUSE.rawValue: "SQLITE_MISUSE", ResultCode.SQLITE_IOERR_SHMSIZE.rawValue: "SQLITE_IOERR_SHMSIZE",
            ResultCode.SQLITE_IOERR_SHMOPEN.rawValue: "SQLITE_IOERR_SHMOPEN", ResultCode.SQLITE_IOERR_SHMLOCK.rawValue: "SQLITE_IOERR_SHMLOCK",
            ResultCode.SQLITE_IOERR_RDLOCK.rawValue: "SQLITE_IOERR_RDLOCK", ResultCode.SQLITE_IOERR_UNLOCK.rawValue: "SQLITE_IOERR_UNLOCK",
            ResultCode.SQLITE_IOERR_CHECKRESERVEDLOCK.rawValue: "SQLITE_IOERR_CHECKRESERVEDLOCK", ResultCode.SQLITE_IOERR_NOMEM.rawValue: "SQLITE_IOERR_NOMEM",
            ResultCode.SQLITE_CANTOPEN_NOTEMPDIR.rawValue: "SQLITE_CANTOPEN_NOTEMPDIR", ResultCode.SQLITE_IOERR_DIR_FSYNC.rawValue: "SQLITE_IOERR_DIR_FSYNC",
            ResultCode.SQLITE_READONLY_RECOVERY.rawValue: "SQLITE_READONLY_RECOVERY", ResultCode.SQLITE_BUSY_RECOVERY.rawValue: "SQLITE_BUSY_RECOVERY",
        ]
        return names[code] ?? "code \(code)"
    }

    var summary: String {
        var lines = ["== fault matrix: \(scenario)"]
        for kind in FaultKind.all where iterations[kind.name] != nil {
            let codes = (errors[kind.name] ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: ", ")
            lines.append("   \(kind.name): \(iterations[kind.name] ?? 0) call indices, \(injected[kind.name] ?? 0) faults injected; errors: \(codes.isEmpty ? "none" : codes)")
        }
        lines.append("   iterations \(iterations.values.reduce(0, +)), faults injected \(injected.values.reduce(0, +)), acknowledged writes lost \(lost.count), corrupt files \(corrupt.count), inconsistent \(inconsistent.count), unreadable \(unreadable.count), failed-but-durable \(failedButDurable.count), untyped errors \(untypedErrors.count), full disks reported as something else \(mislabeled.count)")
        if !unnamed.isEmpty {
            lines.append("   errors that do not name the database: " + unnamed.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: ", "))
        }
        lines.append("   CipherDatabase.verify false alarms (file as left, sound once opened): \(verifyFalseAlarms.count)")
        for item in verifyFalseAlarms.prefix(2) { lines.append("   verify false alarm: \(item)") }
        for item in failedButDurable.prefix(5) { lines.append("   failed-but-durable: \(item)") }
        for (type, message) in examples.sorted(by: { $0.key < $1.key }) { lines.append("   example \(type): \(message)") }
        return lines.joined(separator: "\n")
    }
}
