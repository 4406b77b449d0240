import Foundation

extension DatabaseConnections {
    /// The mode of the folders this creates: the file mode, with search
    /// (`x`) wherever it gives read (0600 → 0700, 0660 → 0770).
    public var directoryMode: mode_t {
        fileMode | ((fileMode & 0o444) >> 2)
    }

    /// Creates the folder at `path` and its missing parents with
    /// ``directoryMode`` (0700 by default), as ``TenantDirectory`` does for
    /// its root. Existing folders are left as they are.
    ///
    /// ```swift
    /// try DatabaseConnections.shared.createDirectory(atPath: "/var/lib/game/tenants")
    /// ```
    ///
    /// - throws: ``DatabaseConnectionsError/cannotCreate(path:reason:)``.
    public func createDirectory(atPath path: String) throws {
        try Self.createDirectory(atPath: path, mode: directoryMode)
    }

    /// Creates the folder at `path` and its missing parents with `mode`:
    /// each with `mkdir(2)` and that mode directly, never a wider one
    /// first (Foundation's `createDirectory(attributes:)` creates with the
    /// umask's mode, then changes it). Bits that the umask removed are
    /// added back on the descriptor of the folder just created, opened
    /// without following links. Existing folders are left as they are.
    ///
    /// ```swift
    /// try DatabaseConnections.createDirectory(atPath: "backups/2026-11-24", mode: 0o700)
    /// ```
    ///
    /// - throws: ``DatabaseConnectionsError/cannotCreate(path:reason:)``.
    public static func createDirectory(atPath path: String, mode: mode_t) throws {
        let url = URL(fileURLWithPath: path).standardizedFileURL
        var missing: [String] = []
        var current = url
        while true {
            var status = stat()
            if stat(current.path, &status) == 0 {
                guard status.st_mode & S_IFMT == S_IFDIR else {
                    throw DatabaseConnectionsError.cannotCreate(path: current.path, reason: "it exists and is not a folder")
                }
                break
            }
            missing.append(current.path)
            let parent = current.deletingLastPathComponent()
            if parent.path == current.path { break }
            current = parent
        }
        for folder in missing.reversed() {
            guard mkdir(folder, mode) == 0 else {
                // Created meanwhile (another thread, another process): fine.
                if errno == EEXIST { continue }
                throw DatabaseConnectionsError.cannotCreate(path: folder, reason: String(cString: strerror(errno)))
            }
            var status = stat()
            let descriptor = open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard descriptor >= 0 else { continue }
            defer { closeDescriptor(descriptor) }
            if fstat(descriptor, &status) == 0, status.st_mode & 0o7777 != mode {
                fchmod(descriptor, mode)
            }
        }
    }

    /// Creates the database file at `path` with ``fileMode`` when it does
    /// not exist, before SQLite opens it: SQLite would create it with its
    /// default 0644 (less the umask), and gives its journal, WAL and
    /// WAL index the mode of the database file. An existing file, or a
    /// link at `path`, is left alone.
    func createDatabaseFile(atPath path: String) {
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, fileMode)
        guard descriptor >= 0 else { return }
        defer { closeDescriptor(descriptor) }
        // The umask may have removed bits the mode asks for (group access):
        // restore them on the file just created, never through its name.
        var status = stat()
        if fstat(descriptor, &status) == 0, status.st_mode & 0o7777 != fileMode {
            fchmod(descriptor, fileMode)
        }
    }
}

/// `close(2)`: inside `DatabaseConnections`, `close` names its method.
private func closeDescriptor(_ descriptor: Int32) {
    close(descriptor)
}
