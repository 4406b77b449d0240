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
