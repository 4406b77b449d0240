import GRDB

/// Where a tenant is in a move between servers, as the catalog's
/// `moveState` column stores it (migration `0003_add_tenant_move.sql`,
/// whose CHECK constraint accepts these three values and NULL).
///
/// ```swift
/// if try catalog.move(of: "acme")?.state == .moving { … }
/// ```
enum MoveState: String, Codable, Sendable, CaseIterable, DatabaseValueConvertible {
    /// On the source: the tenant's writes are frozen while its copy travels.
    case moving
    /// On the source: the target acknowledged the copy; every request
    /// redirects there (`moveTarget`).
    case moved
    /// On the target: brought here by move `moveID`. `moveTarget` is the
    /// redirect the import replaced (the tenant had left this server and
    /// came back), or NULL.
    case imported
}

/// The move columns of a catalog row.
struct MoveRecord: Codable, FetchableRecord, TableRecord, Sendable, Equatable {
    static let databaseTableName = "tenant"
    static var databaseSelection: [any SQLSelectable] { [Column("id"), Column("moveID"), Column("moveState"), Column("moveTarget")] }

    var id: String
    var moveID: String?
    var moveState: MoveState?
    var moveTarget: String?
}
