// The session API is declared by sqlite3.h only under these macros. Debian's
// libsqlite3 is built with both; GRDBSQLite's import of the header is not.
#define SQLITE_ENABLE_SESSION 1
#define SQLITE_ENABLE_PREUPDATE_HOOK 1
#include <sqlite3.h>
#include <string.h>

#include "CSQLiteSession.h"

_Static_assert(GRDBREGISTRY_CONFLICT_DATA == SQLITE_CHANGESET_DATA, "conflict kinds");
_Static_assert(GRDBREGISTRY_CONFLICT_NOTFOUND == SQLITE_CHANGESET_NOTFOUND, "conflict kinds");
_Static_assert(GRDBREGISTRY_CONFLICT_CONFLICT == SQLITE_CHANGESET_CONFLICT, "conflict kinds");
_Static_assert(GRDBREGISTRY_CONFLICT_CONSTRAINT == SQLITE_CHANGESET_CONSTRAINT, "conflict kinds");
_Static_assert(GRDBREGISTRY_CONFLICT_FOREIGN_KEY == SQLITE_CHANGESET_FOREIGN_KEY, "conflict kinds");

typedef struct {
    sqlite3_session *session;
    int status;
    int count;
    int capacity;
    char **names;
} recording;

// The session calls the filter the first time a row of a table changes
// (sqlite3session_attach(NULL) attaches tables on their first change). It
// runs inside SQLite's pre-update hook: no SQL here, only the name is kept.
// SQLite 3.40 then silently ignores a table without a PRIMARY KEY; the name
// lets the caller refuse such a transaction instead.
static int remember_table(void *context, const char *table) {
    recording *r = context;
    if (r->count == r->capacity) {
        int capacity = r->capacity ? r->capacity * 2 : 8;
        char **names = sqlite3_realloc64(r->names, (sqlite3_uint64)capacity * sizeof(char *));
        if (!names) { r->status = SQLITE_NOMEM; return 1; }
        r->names = names;
        r->capacity = capacity;
    }
    char *copy = sqlite3_mprintf("%s", table);
    if (!copy) { r->status = SQLITE_NOMEM; return 1; }
    r->names[r->count++] = copy;
    return 1;
}

int grdbregistry_recording_start(void *connection, void **out) {
    *out = NULL;
    recording *r = sqlite3_malloc64(sizeof(recording));
    if (!r) return SQLITE_NOMEM;
    memset(r, 0, sizeof(recording));
    int rc = sqlite3session_create((sqlite3 *)connection, "main", &r->session);
    if (rc == SQLITE_OK) {
        sqlite3session_table_filter(r->session, remember_table, r);
        rc = sqlite3session_attach(r->session, NULL);
    }
    if (rc != SQLITE_OK) {
        grdbregistry_recording_end(r);
        return rc;
    }
    *out = r;
    return SQLITE_OK;
}

int grdbregistry_recording_status(void *r) { return ((recording *)r)->status; }

int grdbregistry_recording_table_count(void *r) { return ((recording *)r)->count; }

const char *grdbregistry_recording_table_name(void *r, int index) {
    recording *rec = r;
    return (index >= 0 && index < rec->count) ? rec->names[index] : NULL;
}

int grdbregistry_recording_is_empty(void *r) { return sqlite3session_isempty(((recording *)r)->session) ? 1 : 0; }

int grdbregistry_recording_changeset(void *r, int *size, void **bytes) {
    *size = 0;
    *bytes = NULL;
    return sqlite3session_changeset(((recording *)r)->session, size, bytes);
}

void grdbregistry_recording_end(void *r) {
    recording *rec = r;
    if (!rec) return;
    if (rec->session) sqlite3session_delete(rec->session);
    for (int i = 0; i < rec->count; i++) sqlite3_free(rec->names[i]);
    sqlite3_free(rec->names);
    sqlite3_free(rec);
}

void grdbregistry_free(void *pointer) { sqlite3_free(pointer); }

int grdbregistry_changeset_tables(
    const void *bytes, int size, void *context, grdbregistry_changeset_table_callback callback)
{
    sqlite3_changeset_iter *iterator = NULL;
    int rc = sqlite3changeset_start(&iterator, size, (void *)bytes);
    if (rc != SQLITE_OK) return rc;
    const char *previous = NULL;
    while ((rc = sqlite3changeset_next(iterator)) == SQLITE_ROW) {
        const char *table = NULL;
        int columnCount = 0, op = 0, indirect = 0;
        unsigned char *primaryKey = NULL;
        rc = sqlite3changeset_op(iterator, &table, &columnCount, &op, &indirect);
        if (rc == SQLITE_OK) rc = sqlite3changeset_pk(iterator, &primaryKey, &columnCount);
        if (rc != SQLITE_OK) break;
        // The table name pointer stays the same while the iterator is on
        // the same table's block of changes.
        if (table != previous) callback(context, table, columnCount, primaryKey);
        previous = table;
    }
    int finalized = sqlite3changeset_finalize(iterator);
    if (rc == SQLITE_DONE) rc = finalized;
    return rc;
}

typedef struct {
    int kind;
    char *table;
} conflict;

static int abort_on_conflict(void *context, int kind, sqlite3_changeset_iter *iterator) {
    conflict *c = context;
    if (c->kind == GRDBREGISTRY_CONFLICT_NONE) {
        c->kind = kind;
        // A foreign-key conflict concerns the whole changeset: the iterator
        // then has no current change to name a table.
        const char *table = NULL;
        int columnCount = 0, op = 0, indirect = 0;
        if (kind != SQLITE_CHANGESET_FOREIGN_KEY
            && sqlite3changeset_op(iterator, &table, &columnCount, &op, &indirect) == SQLITE_OK && table) {
            c->table = sqlite3_mprintf("%s", table);
        }
    }
    return SQLITE_CHANGESET_ABORT;
}

int grdbregistry_changeset_apply(
    void *connection, const void *bytes, int size, int *conflictKind, char **conflictTable)
{
    conflict c = { GRDBREGISTRY_CONFLICT_NONE, NULL };
    int rc = sqlite3changeset_apply((sqlite3 *)connection, size, (void *)bytes, NULL, abort_on_conflict, &c);
    *conflictKind = c.kind;
    *conflictTable = c.table;
    return rc;
}

// ---------------------------------------------------------------------------
// Applying a run of changesets with statements prepared once per run.
//
// sqlite3changeset_apply reads each table's columns and prepares its
// INSERT, UPDATE, DELETE and SELECT statements on every call: about 0.4 ms
// per recorded transaction, most of a 10,000-change tail's replay. This
// applies each change of each changeset, in order, with one statement of
// the same meaning as the session's (an INSERT of every column; a DELETE
// or UPDATE matching the primary key with `=` and every other recorded old
// value with `IS`, which must change exactly one row), prepared once per
// table (per set of recorded columns for an UPDATE). It never resolves a
// conflict: any conflict, constraint failure, foreign-key violation left
// at the end of a changeset, sequence other than expected, or anything it
// does not handle (a table of more than 64 columns) returns an error, and
// the caller rolls back and applies the changesets one by one with
// sqlite3changeset_apply, which then says precisely what failed.

typedef struct update_statement {
    sqlite3_uint64 oldMask, newMask;
    sqlite3_stmt *statement;
    struct update_statement *next;
} update_statement;

typedef struct {
    char *name;
    int columnCount;
    char **columns;
    unsigned char *primaryKey;
    sqlite3_stmt *insert, *delete;
    update_statement *updates;
} applied_table;

typedef struct {
    sqlite3 *db;
    int count, capacity;
    applied_table *tables;
} apply_run;

static void apply_run_end(apply_run *run) {
    for (int i = 0; i < run->count; i++) {
        applied_table *t = &run->tables[i];
        sqlite3_free(t->name);
        for (int c = 0; c < t->columnCount; c++) sqlite3_free(t->columns ? t->columns[c] : NULL);
        sqlite3_free(t->columns);
        sqlite3_free(t->primaryKey);
        sqlite3_finalize(t->insert);
        sqlite3_finalize(t->delete);
        for (update_statement *u = t->updates; u;) {
            update_statement *next = u->next;
            sqlite3_finalize(u->statement);
            sqlite3_free(u);
            u = next;
        }
    }
    sqlite3_free(run->tables);
}

// The table named `name` with the changeset's column count and key, its
// columns read from `main` (in cid order, as the session records them) on
// first use. The caller checked the schema; a table that differs fails.
static int apply_run_table(
    apply_run *run, const char *name, int columnCount, const unsigned char *primaryKey, applied_table **out)
{
    for (int i = 0; i < run->count; i++) {
        applied_table *t = &run->tables[i];
        if (strcmp(t->name, name) == 0) {
            if (t->columnCount != columnCount || memcmp(t->primaryKey, primaryKey, (size_t)columnCount) != 0) return SQLITE_SCHEMA;
            *out = t;
            return SQLITE_OK;
        }
    }
    if (columnCount < 1 || columnCount > 64) return SQLITE_RANGE;
    if (run->count == run->capacity) {
        int capacity = run->capacity ? run->capacity * 2 : 4;
        applied_table *tables = sqlite3_realloc64(run->tables, (sqlite3_uint64)capacity * sizeof(applied_table));
        if (!tables) return SQLITE_NOMEM;
        run->tables = tables;
        run->capacity = capacity;
    }
    applied_table *t = &run->tables[run->count];
    memset(t, 0, sizeof(applied_table));
    run->count++;
    t->columnCount = columnCount;
    t->name = sqlite3_mprintf("%s", name);
    t->columns = sqlite3_malloc64((sqlite3_uint64)columnCount * sizeof(char *));
    t->primaryKey = sqlite3_malloc64((sqlite3_uint64)columnCount);
    if (!t->name || !t->columns || !t->primaryKey) return SQLITE_NOMEM;
    memset(t->columns, 0, (size_t)columnCount * sizeof(char *));
    memcpy(t->primaryKey, primaryKey, (size_t)columnCount);

    sqlite3_stmt *info = NULL;
    int rc = sqlite3_prepare_v2(run->db, "SELECT name, pk FROM pragma_table_info(?1, 'main') ORDER BY cid", -1, &info, NULL);
    if (rc != SQLITE_OK) return rc;
    sqlite3_bind_text(info, 1, name, -1, SQLITE_STATIC);
    int found = 0;
    while ((rc = sqlite3_step(info)) == SQLITE_ROW) {
        const unsigned char *column = sqlite3_column_text(info, 0);
        int isKey = sqlite3_column_int(info, 1) > 0;
        if (found == columnCount || !column || isKey != (primaryKey[found] != 0)) { rc = SQLITE_SCHEMA; break; }
        t->columns[found] = sqlite3_mprintf("%s", (const char *)column);
        if (!t->columns[found]) { rc = SQLITE_NOMEM; break; }
        found++;
    }
    sqlite3_finalize(info);
    if (rc != SQLITE_DONE) return rc == SQLITE_ROW ? SQLITE_SCHEMA : rc;
    if (found != columnCount) return SQLITE_SCHEMA;
    *out = t;
    return SQLITE_OK;
}

static int apply_prepare(sqlite3 *db, sqlite3_str *sql, sqlite3_stmt **statement) {
    char *text = sqlite3_str_finish(sql);
    if (!text) return SQLITE_NOMEM;
    int rc = sqlite3_prepare_v2(db, text, -1, statement, NULL);
    sqlite3_free(text);
    return rc;
}

// INSERT INTO main."t"("a", "b") VALUES (?1, ?2)
static int apply_insert_statement(apply_run *run, applied_table *t, sqlite3_stmt **out) {
    if (!t->insert) {
        sqlite3_str *sql = sqlite3_str_new(run->db);
        sqlite3_str_appendf(sql, "INSERT INTO main.\"%w\" (", t->name);
        for (int c = 0; c < t->columnCount; c++) sqlite3_str_appendf(sql, "%s\"%w\"", c ? ", " : "", t->columns[c]);
        sqlite3_str_appendf(sql, ") VALUES (");
        for (int c = 0; c < t->columnCount; c++) sqlite3_str_appendf(sql, "%s?%d", c ? ", " : "", c + 1);
        sqlite3_str_appendf(sql, ")");
        int rc = apply_prepare(run->db, sql, &t->insert);
        if (rc != SQLITE_OK) return rc;
    }
    *out = t->insert;
    return SQLITE_OK;
}

// The WHERE clause of a DELETE or an UPDATE: key columns with `=`, other
// columns whose old value was recorded with `IS`; parameter i+1 is column i.
static void apply_where(sqlite3_str *sql, applied_table *t, sqlite3_uint64 oldMask) {
    sqlite3_str_appendf(sql, " WHERE ");
    int first = 1;
    for (int c = 0; c < t->columnCount; c++) {
        if (!(oldMask & ((sqlite3_uint64)1 << c))) continue;
        sqlite3_str_appendf(sql, "%s\"%w\" %s ?%d", first ? "" : " AND ", t->columns[c], t->primaryKey[c] ? "=" : "IS", c + 1);
        first = 0;
    }
}

// DELETE FROM main."t" WHERE "id" = ?1 AND "name" IS ?2
static int apply_delete_statement(apply_run *run, applied_table *t, sqlite3_stmt **out) {
    if (!t->delete) {
        sqlite3_str *sql = sqlite3_str_new(run->db);
        sqlite3_str_appendf(sql, "DELETE FROM main.\"%w\"", t->name);
        sqlite3_uint64 all = t->columnCount == 64 ? ~(sqlite3_uint64)0 : (((sqlite3_uint64)1 << t->columnCount) - 1);
        apply_where(sql, t, all);
        int rc = apply_prepare(run->db, sql, &t->delete);
        if (rc != SQLITE_OK) return rc;
    }
    *out = t->delete;
    return SQLITE_OK;
}

// UPDATE main."t" SET "score" = ?(n+2) WHERE "id" = ?1 AND "score" IS ?2:
// old values are parameters 1...n, new ones n+1...2n.
static int apply_update_statement(
    apply_run *run, applied_table *t, sqlite3_uint64 oldMask, sqlite3_uint64 newMask, sqlite3_stmt **out)
{
    for (update_statement *u = t->updates; u; u = u->next) {
        if (u->oldMask == oldMask && u->newMask == newMask) { *out = u->statement; return SQLITE_OK; }
    }
    update_statement *u = sqlite3_malloc64(sizeof(update_statement));
    if (!u) return SQLITE_NOMEM;
    memset(u, 0, sizeof(update_statement));
    sqlite3_str *sql = sqlite3_str_new(run->db);
    sqlite3_str_appendf(sql, "UPDATE main.\"%w\" SET ", t->name);
    int first = 1;
    for (int c = 0; c < t->columnCount; c++) {
        if (!(newMask & ((sqlite3_uint64)1 << c))) continue;
        sqlite3_str_appendf(sql, "%s\"%w\" = ?%d", first ? "" : ", ", t->columns[c], t->columnCount + c + 1);
        first = 0;
    }
    apply_where(sql, t, oldMask);
    int rc = apply_prepare(run->db, sql, &u->statement);
    if (rc != SQLITE_OK) { sqlite3_finalize(u->statement); sqlite3_free(u); return rc; }
    u->oldMask = oldMask;
    u->newMask = newMask;
    u->next = t->updates;
    t->updates = u;
    *out = u->statement;
    return SQLITE_OK;
}

// Applies the current change of `iterator`.
static int apply_change(apply_run *run, sqlite3_changeset_iter *iterator) {
    const char *name = NULL;
    int columnCount = 0, op = 0, indirect = 0;
    unsigned char *primaryKey = NULL;
    int rc = sqlite3changeset_op(iterator, &name, &columnCount, &op, &indirect);
    if (rc == SQLITE_OK) rc = sqlite3changeset_pk(iterator, &primaryKey, &columnCount);
    if (rc != SQLITE_OK) return rc;
    applied_table *t = NULL;
    rc = apply_run_table(run, name, columnCount, primaryKey, &t);
    if (rc != SQLITE_OK) return rc;

    sqlite3_stmt *statement = NULL;
    sqlite3_uint64 oldMask = 0, newMask = 0;
    sqlite3_value *oldValues[64], *newValues[64];
    for (int c = 0; c < columnCount; c++) {
        oldValues[c] = newValues[c] = NULL;
        if (op != SQLITE_INSERT) {
            rc = sqlite3changeset_old(iterator, c, &oldValues[c]);
            if (rc != SQLITE_OK) return rc;
            if (oldValues[c]) oldMask |= (sqlite3_uint64)1 << c;
        }
        if (op != SQLITE_DELETE) {
            rc = sqlite3changeset_new(iterator, c, &newValues[c]);
            if (rc != SQLITE_OK) return rc;
            if (newValues[c]) newMask |= (sqlite3_uint64)1 << c;
        }
    }
    for (int c = 0; c < columnCount; c++) {
        // A row is found by its whole key; an insert or a delete carries
        // every column.
        if (op != SQLITE_INSERT && primaryKey[c] && !oldValues[c]) return SQLITE_CORRUPT;
        if (op == SQLITE_INSERT && !newValues[c]) return SQLITE_CORRUPT;
        if (op == SQLITE_DELETE && !oldValues[c]) return SQLITE_CORRUPT;
    }
    switch (op) {
    case SQLITE_INSERT:
        rc = apply_insert_statement(run, t, &statement);
        for (int c = 0; rc == SQLITE_OK && c < columnCount; c++) rc = sqlite3_bind_value(statement, c + 1, newValues[c]);
        break;
    case SQLITE_DELETE:
        rc = apply_delete_statement(run, t, &statement);
        for (int c = 0; rc == SQLITE_OK && c < columnCount; c++) rc = sqlite3_bind_value(statement, c + 1, oldValues[c]);
        break;
    case SQLITE_UPDATE:
        if (newMask == 0) return SQLITE_CORRUPT;
        rc = apply_update_statement(run, t, oldMask, newMask, &statement);
        for (int c = 0; rc == SQLITE_OK && c < columnCount; c++) {
            if (oldValues[c]) rc = sqlite3_bind_value(statement, c + 1, oldValues[c]);
            if (rc == SQLITE_OK && newValues[c]) rc = sqlite3_bind_value(statement, columnCount + c + 1, newValues[c]);
        }
        break;
    default:
        return SQLITE_CORRUPT;
    }
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_step(statement);
    int changed = sqlite3_changes(run->db);
    sqlite3_reset(statement);
    sqlite3_clear_bindings(statement);
    if (rc != SQLITE_DONE) return rc;
    // An update or a delete that found no row with the recorded values is
    // a conflict (DATA or NOTFOUND in the session's terms).
    if (op != SQLITE_INSERT && changed != 1) return SQLITE_CONSTRAINT;
    return SQLITE_OK;
}

int grdbregistry_changesets_apply_in_order(
    void *connection, int count, const void *bytes, const int *offsets, const int *sizes,
    const char *sequenceTable, const long long *sequences, int *failedIndex)
{
    sqlite3 *db = connection;
    *failedIndex = -1;
    apply_run run = { db, 0, 0, NULL };
    sqlite3_stmt *sequence = NULL;
    int deferred = 0;
    int rc = SQLITE_OK;
    {
        sqlite3_stmt *pragma = NULL;
        rc = sqlite3_prepare_v2(db, "PRAGMA defer_foreign_keys", -1, &pragma, NULL);
        if (rc == SQLITE_OK && sqlite3_step(pragma) == SQLITE_ROW) deferred = sqlite3_column_int(pragma, 0);
        sqlite3_finalize(pragma);
    }
    // As sqlite3changeset_apply does: foreign keys are checked at the end
    // of each changeset, not after each of its rows.
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, "PRAGMA defer_foreign_keys = 1", NULL, NULL, NULL);
    if (rc == SQLITE_OK) {
        // The row the sequence lives in, and how many rows the table holds:
        // one, as ChangeSequence reads it.
        char *sql = sqlite3_mprintf(
            "SELECT s.sequence, (SELECT count(*) FROM main.\"%w\") FROM main.\"%w\" AS s WHERE s.id = 1",
            sequenceTable, sequenceTable);
        if (!sql) rc = SQLITE_NOMEM;
        else {
            rc = sqlite3_prepare_v2(db, sql, -1, &sequence, NULL);
            sqlite3_free(sql);
        }
    }
    for (int i = 0; rc == SQLITE_OK && i < count; i++) {
        sqlite3_changeset_iter *iterator = NULL;
        rc = sqlite3changeset_start(&iterator, sizes[i], (void *)((const char *)bytes + offsets[i]));
        if (rc != SQLITE_OK) { *failedIndex = i; break; }
        while ((rc = sqlite3changeset_next(iterator)) == SQLITE_ROW) {
            rc = apply_change(&run, iterator);
            if (rc != SQLITE_OK) break;
        }
        int finalized = sqlite3changeset_finalize(iterator);
        if (rc == SQLITE_DONE) rc = finalized;
        if (rc == SQLITE_OK) {
            int current = 0, highest = 0;
            rc = sqlite3_db_status(db, SQLITE_DBSTATUS_DEFERRED_FKS, &current, &highest, 0);
            if (rc == SQLITE_OK && current > 0) rc = SQLITE_CONSTRAINT_FOREIGNKEY;
        }
        if (rc == SQLITE_OK) {
            // Each transaction leaves the database at its own sequence.
            if (sqlite3_step(sequence) != SQLITE_ROW
                || sqlite3_column_type(sequence, 0) != SQLITE_INTEGER
                || sqlite3_column_int64(sequence, 0) != sequences[i]
                || sqlite3_column_int64(sequence, 1) != 1) rc = SQLITE_MISMATCH;
            sqlite3_reset(sequence);
        }
        if (rc != SQLITE_OK) *failedIndex = i;
    }
    sqlite3_finalize(sequence);
    apply_run_end(&run);
    if (!deferred) {
        int restored = sqlite3_exec(db, "PRAGMA defer_foreign_keys = 0", NULL, NULL, NULL);
        if (rc == SQLITE_OK) rc = restored;
    }
    return rc;
}
