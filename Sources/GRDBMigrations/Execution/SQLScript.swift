import GRDB

/// Runs the statements of a SQL migration file one at a time, so that a
/// failure can name the line where the failing statement starts.
///
/// Statements are compiled lazily, each after the previous one ran, so a file
/// may create a table and then insert into it.
struct SQLScript {
    let file: SQLMigrationFile
    private let bytes: [UInt8]

    init(file: SQLMigrationFile) {
        self.file = file
        self.bytes = Array(file.sql.utf8)
    }

    func execute(in db: Database) throws {
        let cursor = try db.allStatements(sql: file.sql)
        // Byte offset in the file from which the next statement is searched.
        var searchOffset = 0
        while true {
            let statement: Statement?
            do {
                statement = try cursor.next()
            } catch let error as DatabaseError where MigrationError.isStorageFailure(error) {
                throw error
            } catch {
                // Compilation failed: the failing statement starts at the next
                // token after the last statement that compiled.
                let start = skipTrivia(from: searchOffset)
                throw MigrationError.statementFailed(
                    identifier: file.identifier, path: file.path, line: line(at: start),
                    statement: text(fromOffset: start), reason: Self.reason(error))
            }
            guard let statement else { return }

            let sql = statement.sql
            let found = offset(of: Array(sql.utf8), from: searchOffset) ?? searchOffset
            let start = skipTrivia(from: found)
            let statementLine = line(at: start)
            if Self.isTransactionControl(sql) {
                throw MigrationError.transactionControlStatement(
                    identifier: file.identifier, path: file.path, line: statementLine)
            }
            do {
                try statement.execute()
            } catch let error as DatabaseError where MigrationError.isStorageFailure(error) || error.resultCode == .SQLITE_CANTOPEN {
                // Not the file's fault (a journal or temporary file that
                // can't be opened mid-statement is the environment's): the
                // runner reports it against the database, so nobody edits a
                // correct migration.
                throw error
            } catch {
                throw MigrationError.statementFailed(
                    identifier: file.identifier, path: file.path, line: statementLine,
                    statement: sql, reason: Self.reason(error))
            }
            searchOffset = found + sql.utf8.count
        }
    }

    private static func reason(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            return error.message ?? error.resultCode.description
        }
        return String(describing: error)
    }

    /// True for statements that end or open the migration's transaction.
    /// SAVEPOINT and RELEASE nest inside it and stay allowed.
    private static func isTransactionControl(_ sql: String) -> Bool {
        let keyword = sql.prefix(while: { $0.isLetter }).uppercased()
        return ["BEGIN", "COMMIT", "END", "ROLLBACK"].contains(keyword)
    }

    /// The first line of the text starting at `offset`, for error messages.
    private func text(fromOffset offset: Int) -> String {
        let end = bytes[offset...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
        return String(decoding: bytes[offset..<end], as: UTF8.self)
    }

    private func line(at offset: Int) -> Int {
        1 + bytes[..<min(offset, bytes.count)].reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
    }

    private func offset(of needle: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, needle.count <= bytes.count - start else { return nil }
        var index = start
        while index + needle.count <= bytes.count {
            if bytes[index] == needle[0], bytes[index..<(index + needle.count)].elementsEqual(needle) {
                return index
            }
            index += 1
        }
        return nil
    }

    /// Skips white space, `-- line` comments and `/* block */` comments.
    private func skipTrivia(from start: Int) -> Int {
        var index = start
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\t")
                || byte == UInt8(ascii: "\r") || byte == UInt8(ascii: ";") {
                index += 1
            } else if byte == UInt8(ascii: "-"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "-") {
                while index < bytes.count, bytes[index] != UInt8(ascii: "\n") { index += 1 }
            } else if byte == UInt8(ascii: "/"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "*") {
                index += 2
                while index + 1 < bytes.count, !(bytes[index] == UInt8(ascii: "*") && bytes[index + 1] == UInt8(ascii: "/")) {
                    index += 1
                }
                index = min(index + 2, bytes.count)
            } else {
                return index
            }
        }
        return min(index, bytes.count)
    }
}
