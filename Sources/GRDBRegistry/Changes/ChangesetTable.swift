import CSQLiteSession
import Foundation
import GRDBSQLite

/// A table as a changeset describes it: its name, and per column whether it
/// is a primary-key column.
struct ChangesetTable: Hashable {
    var name: String
    var primaryKey: [Bool]

    /// The SQLite result code of a changeset that can't be read.
    struct ReadError: Error {
        var code: Int32
    }

    /// The tables of `changeset`, in order, read without a database.
    static func tables(in changeset: Data) throws(ReadError) -> [ChangesetTable] {
        guard let size = Int32(exactly: changeset.count) else { throw ReadError(code: SQLITE_TOOBIG) }
        let collector = Collector()
        let code = changeset.withUnsafeBytes { buffer in
            grdbregistry_changeset_tables(buffer.baseAddress, size, Unmanaged.passUnretained(collector).toOpaque()) {
                context, name, columnCount, primaryKey in
                guard let context, let name else { return }
                let collector = Unmanaged<Collector>.fromOpaque(context).takeUnretainedValue()
                let flags = (0..<Int(max(columnCount, 0))).map { primaryKey?[$0] ?? 0 != 0 }
                collector.tables.append(ChangesetTable(name: String(cString: name), primaryKey: flags))
            }
        }
        guard code == SQLITE_OK else { throw ReadError(code: code) }
        return collector.tables
    }

    /// What the C callback fills; it lives for the synchronous call only.
    private final class Collector {
        var tables: [ChangesetTable] = []
    }
}
