#ifndef CSQLITESESSION_H
#define CSQLITESESSION_H

/// SQLite's session extension (record a transaction's changeset, apply a
/// changeset), for GRDBRegistry's Changes folder.
///
/// GRDB's GRDBSQLite module imports sqlite3.h without SQLITE_ENABLE_SESSION,
/// so the session API is invisible to Swift. This header declares only
/// `void *` and integers, and never includes sqlite3.h: including it here
/// with the session macros would clash with GRDBSQLite's module. Connections
/// are `sqlite3 *` passed as `void *`. Return codes are SQLite result codes.

/// The conflict kinds of sqlite3changeset_apply, with SQLite's values
/// (SQLITE_CHANGESET_DATA ... SQLITE_CHANGESET_FOREIGN_KEY; the .c file
/// checks that they match).
enum {
    GRDBREGISTRY_CONFLICT_NONE = 0,
    GRDBREGISTRY_CONFLICT_DATA = 1,
    GRDBREGISTRY_CONFLICT_NOTFOUND = 2,
    GRDBREGISTRY_CONFLICT_CONFLICT = 3,
    GRDBREGISTRY_CONFLICT_CONSTRAINT = 4,
    GRDBREGISTRY_CONFLICT_FOREIGN_KEY = 5,
};

/// Starts recording the changes of database "main" of `connection`, all of
/// its tables, into a new recording stored in `*recording`. The recording
/// also remembers the name of every table whose rows changed, including
/// tables the session cannot record (no explicit PRIMARY KEY in SQLite 3.40).
int grdbregistry_recording_start(void *connection, void **recording);

/// SQLITE_OK, or the error that made the recording incomplete (out of memory
/// while remembering a table name).
int grdbregistry_recording_status(void *recording);

/// The number of tables whose rows changed, then their names (owned by the
/// recording, valid until it ends).
int grdbregistry_recording_table_count(void *recording);
const char *grdbregistry_recording_table_name(void *recording, int index);

/// 1 when the session recorded no change at all (not even one that cancels
/// out), else 0.
int grdbregistry_recording_is_empty(void *recording);

/// The changeset recorded so far, in a buffer the caller frees with
/// grdbregistry_free. An empty changeset has size 0.
int grdbregistry_recording_changeset(void *recording, int *size, void **bytes);

/// Deletes the session and the recording. Safe with NULL.
void grdbregistry_recording_end(void *recording);

void grdbregistry_free(void *pointer);

/// Calls `callback` once per table of the changeset, in order: its name,
/// its column count and, per column, 1 when it is a primary-key column.
/// Returns SQLITE_OK, or the error of a changeset SQLite can't read.
typedef void (*grdbregistry_changeset_table_callback)(
    void *context, const char *table, int columnCount, const unsigned char *primaryKey);
int grdbregistry_changeset_tables(
    const void *bytes, int size, void *context, grdbregistry_changeset_table_callback callback);

/// Applies the changeset to database "main" of `connection`. The first
/// conflict of any kind aborts: nothing of this changeset stays applied,
/// `*conflictKind` is a GRDBREGISTRY_CONFLICT_* value and `*conflictTable`
/// the table's name (NULL for a foreign-key conflict, which SQLite reports
/// for the whole changeset), to free with grdbregistry_free.
int grdbregistry_changeset_apply(
    void *connection, const void *bytes, int size, int *conflictKind, char **conflictTable);

/// Applies `count` changesets to database "main" of `connection`, in order:
/// changeset i is the `sizes[i]` bytes at `offsets[i]` of `bytes`, and after
/// it `sequenceTable` must hold one row, of id 1, whose integer `sequence`
/// is `sequences[i]`. Statements
/// are prepared once per run, not once per changeset. No conflict is ever
/// resolved: SQLITE_OK when every change applied as recorded, else an error
/// code (a conflict, a constraint, a foreign key, a sequence, or a change it
/// does not handle) with `*failedIndex` the changeset at fault, or -1. The
/// caller runs it in a savepoint, rolls back on any error, and applies the
/// changesets one by one to learn what failed.
int grdbregistry_changesets_apply_in_order(
    void *connection, int count, const void *bytes, const int *offsets, const int *sizes,
    const char *sequenceTable, const long long *sequences, int *failedIndex);

#endif
